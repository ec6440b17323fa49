import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(__dirname, '..', '..');
const STAMP = join(ROOT, 'node_modules', '.cache', 'bullmq-stage-deferral-build.stamp');
const LOCK = join(ROOT, 'node_modules', '.cache', 'bullmq-stage-deferral-build.lock');

function files(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? files(path) : [path];
    });
}

/** A hash of everything the build reads: src/, package.json and the tsup config. */
function sourceHash(): string {
  const h = createHash('sha256');
  for (const path of [...files(join(ROOT, 'src')), join(ROOT, 'package.json'), join(ROOT, 'tsup.config.ts')]) {
    h.update(path).update(readFileSync(path));
  }
  return h.digest('hex');
}

function sleep(ms: number) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Runs `npm run build` unless dist/ was built from the current sources. Test
 * files in parallel workers share one build: a lock directory serialises them.
 */
export function buildOnce(timeoutMs = 120_000): void {
  mkdirSync(join(LOCK, '..'), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      // a lock left by a killed run is stale after the timeout
      const lock = statSync(LOCK, { throwIfNoEntry: false });
      if (lock && Date.now() - lock.mtimeMs > timeoutMs) rmSync(LOCK, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`Timed out waiting for the build lock ${LOCK}`);
      sleep(200);
    }
  }
  try {
    const hash = sourceHash();
    if (existsSync(STAMP) && readFileSync(STAMP, 'utf8') === hash && existsSync(join(ROOT, 'dist', 'cli.js'))) return;
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'pipe', timeout: timeoutMs });
    writeFileSync(STAMP, hash);
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}
