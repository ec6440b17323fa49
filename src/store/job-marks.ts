import { CMD } from './client';
import type { StoreParts } from './parts';

/**
 * A job failed for good: its licence member gets the mark `?` (see the FAIL script). False
 * when `bullToken` (the failing worker's) no longer holds BullMQ's lock of the job: nothing
 * is written, the job was handed on (BullMQ would refuse that worker's failure). `kept`: BullMQ keeps
 * the job as it fails (`keptWhenFinished(removeOnFail)`); a job it removes leaves no record.
 */
export async function markJobFailed(
  s: StoreParts,
  sid: string,
  jobId: string,
  kept: boolean,
  bullToken: string,
  afterBullMQ: { processedOn?: number } | undefined,
): Promise<boolean> {
  const r = await s.tx.one('fail', (m) =>
    m[CMD.sdFail]!(
      s.keys.index,
      s.keys.job(jobId),
      `${s.keys.job(jobId)}:lock`,
      sid,
      jobId,
      s.keys.base,
      bullToken,
      kept ? '1' : '0',
      afterBullMQ ? '1' : '0',
      String(afterBullMQ?.processedOn ?? ''),
    ),
  );
  return r !== 2;
}

/**
 * A job added by hand completed: marked, so a retry by hand of it starts a fresh chain
 * (`afterBullMQ`: a Worker listener's call, once BullMQ completed the run that began at its
 * `processedOn`).
 */
export async function markJobFinished(
  s: StoreParts,
  jobId: string,
  afterBullMQ: { processedOn?: number } | undefined,
  bullToken: string,
): Promise<void> {
  const c = await s.client();
  await c[CMD.sdFinished]!(
    s.keys.job(jobId),
    `${s.keys.job(jobId)}:lock`,
    afterBullMQ ? '1' : '0',
    String(afterBullMQ?.processedOn ?? ''),
    bullToken,
  );
}

/** Counts a real failure the engine retries itself (not in BullMQ's `attemptsMade`). */
export async function countJobRetried(s: StoreParts, jobId: string): Promise<void> {
  const c = await s.client();
  await c[CMD.sdRetried]!(s.keys.job(jobId));
}
