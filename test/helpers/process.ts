import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** The repository's root. */
export const ROOT = join(__dirname, '..', '..');

/**
 * Runs a command in its own process group (npx runs tsx runs node: a hung one
 * must be killed whole) and resolves with its exit and its output, or with
 * `timedOut` once the whole group was killed after `deadlineMs`.
 */
export function runToExit(
  command: string,
  args: readonly string[],
  env: Record<string, string>,
  deadlineMs: number,
): Promise<{ code: number | null; signal: string | null; timedOut: boolean; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, deadlineMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, timedOut, out });
    });
  });
}
