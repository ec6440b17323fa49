import { execFile } from 'node:child_process';
import { join } from 'node:path';

const CLOCK = join(__dirname, 'clock-ahead.cjs');
const CLI_SRC = join(__dirname, '..', '..', 'src', 'cli.ts');

/** Runs the ops CLI in a process whose clock is `aheadMs` ahead of this one's (negative: behind). */
export function cliWithClock(
  aheadMs: number,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--require', CLOCK, '--import', 'tsx', CLI_SRC, ...args],
      { timeout: 30_000, env: { ...process.env, REDIS_URL: '', CLOCK_AHEAD_MS: String(aheadMs) } },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
    );
  });
}
