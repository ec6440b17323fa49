import { CMD } from './client';
import type { StoreParts } from './parts';

/**
 * A job failed for good: it is recorded `<job id>?` (see the FAIL script). False when
 * `bullToken` (the failing worker's) no longer holds BullMQ's lock of the job: nothing is
 * written, the job was handed on (BullMQ would refuse that worker's failure). `kept`: BullMQ
 * keeps the job as it fails (`keptWhenFinished(removeOnFail)`); a job it removes leaves no record.
 */
export async function markJobFailed(
  s: StoreParts,
  sid: string,
  jobId: string,
  kept: boolean,
  bullToken: string,
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
    ),
  );
  return r !== 2;
}
