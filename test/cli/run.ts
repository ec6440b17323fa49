import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../helpers/build';
import { redisOptions } from '../helpers/redis';

export const CLI = join(ROOT, 'dist', 'cli.js');
const o = redisOptions();
export const REDIS_URL = `redis://${o.password ? `:${o.password}@` : ''}${o.host}:${o.port}`;

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the built bin as a child process with exactly these arguments (REDIS_URL unset). */
export function run(args: readonly string[], timeoutMs = 20_000): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { timeout: timeoutMs, env: { ...process.env, REDIS_URL: '' } },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr, ms: Date.now() - started });
      },
    );
  });
}

/** Runs the bin against the test Redis on one queue. */
export function cliOn(on: { prefix: string; queueName: string }, ...args: string[]): Promise<Run> {
  return run(['--redis', REDIS_URL, '--queue', on.queueName, '--prefix', on.prefix, ...args]);
}
