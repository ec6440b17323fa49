import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Check of scripts/compat-matrix.sh installs each pair "over a
 * scratch copy; the working tree is never touched". A git worktree whose
 * node_modules is a symlink (as every agent worktree here links
 * /work/main/node_modules) must not have the pair installed into the
 * symlink's target.
 */
describe('C30: the compatibility matrix script', () => {
  it("a repository whose node_modules is a symlink keeps its target untouched (the pair goes into the scratch copy's own node_modules)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'sd-r13-compat-'));
    try {
      // the shared install the worktree links to: fake tsc/jest that pass, a bullmq and ioredis manifest
      const shared = join(dir, 'shared-node_modules');
      mkdirSync(join(shared, '.bin'), { recursive: true });
      for (const bin of ['tsc', 'jest']) {
        writeFileSync(join(shared, '.bin', bin), '#!/bin/sh\nexit 0\n');
        chmodSync(join(shared, '.bin', bin), 0o755);
      }
      for (const [name, version] of [
        ['bullmq', '6.7.0'],
        ['ioredis', '6.0.0'],
      ]) {
        mkdirSync(join(shared, name!));
        writeFileSync(join(shared, name!, 'package.json'), JSON.stringify({ name, version, main: 'index.js' }));
      }
      const repo = join(dir, 'worktree');
      mkdirSync(join(repo, 'scripts'), { recursive: true });
      copyFileSync(
        join(__dirname, '..', '..', 'scripts', 'compat-matrix.sh'),
        join(repo, 'scripts', 'compat-matrix.sh'),
      );
      writeFileSync(join(repo, 'package.json'), JSON.stringify({ devDependencies: { bullmq: '^6.7.0' } }));
      symlinkSync(shared, join(repo, 'node_modules'));
      // npm install --no-save, as the script runs it: writes into ./node_modules of its cwd
      const bin = join(dir, 'bin');
      mkdirSync(bin);
      writeFileSync(join(bin, 'npm'), '#!/bin/sh\ntouch node_modules/installed-here\n');
      chmodSync(join(bin, 'npm'), 0o755);
      const out = execFileSync('bash', ['scripts/compat-matrix.sh', '5.81:5'], {
        cwd: repo,
        env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
        encoding: 'utf8',
      });
      expect(out).toMatch(/all pairs passed/);
      expect(existsSync(join(shared, 'installed-here'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
