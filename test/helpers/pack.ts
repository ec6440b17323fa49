import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildOnce, ROOT } from './build';
import { redisOptions } from './redis';

const run = promisify(execFile);

export const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** npm install from the cache that installing this repository filled, where it can. */
export const OFFLINE_FIRST = ['--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund'];

export function redisUrl(): string {
  const o = redisOptions();
  return `redis://${o.password ? `:${encodeURIComponent(o.password)}@` : ''}${o.host}:${o.port}`;
}

/** Runs a command, rejecting with its output when it fails. */
export async function sh(file: string, args: string[], cwd: string) {
  try {
    return await run(file, args, { cwd, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${file} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

/** This repository's dev dependency versions (what a consumer installs from the npm cache). */
export function devDependencies(): Record<string, string> {
  return (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> })
    .devDependencies;
}

/** A consumer project in a temporary directory with the packed package installed (`remove` deletes it). */
export interface Consumer {
  dir: string;
  tarball: string;
  files: string[];
  /** Runs a command in the consumer's directory. */
  sh(file: string, args: string[]): ReturnType<typeof sh>;
  remove(): void;
}

/** Builds (once), packs the package and installs the tarball, with `extra` packages, into a fresh consumer. */
export async function packedConsumer(name: string, extra: string[] = []): Promise<Consumer> {
  buildOnce();
  const dir = mkdtempSync(join(tmpdir(), `${name}-`));
  const { stdout } = await sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], ROOT);
  const packed = (JSON.parse(stdout) as { filename: string; files: { path: string }[] }[])[0]!;
  const tarball = join(dir, packed.filename);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
  await sh('npm', ['install', ...OFFLINE_FIRST, tarball, '@types/node@20', ...extra], dir);
  return {
    dir,
    tarball,
    files: packed.files.map((f) => f.path),
    sh: (file, args) => sh(file, args, dir),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
