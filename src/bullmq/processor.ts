import { DelayedError, UnrecoverableError, type Job, type Processor } from 'bullmq';
import type { DeferralStore } from '../deferral-store';
import type { Dispatcher } from '../dispatch';
import { DeferralLimitError, DispatchFailedError, isStageDeferralError } from '../errors';
import { parseJobData, refOf } from '../job-data';
import type { ResolvedOptions } from '../options';
import { stageId } from '../stage-ref';
import type { DispatchResult } from '../types';

/** An error BullMQ will not retry, keeping the library's code and message. */
function unrecoverable(error: Error): UnrecoverableError {
  const e = new UnrecoverableError(error.message);
  (e as UnrecoverableError & { code?: string }).code = isStageDeferralError(error) ? error.code : undefined;
  return e;
}

/**
 * The BullMQ processor: one dispatch job in, one attempt of its stage.
 * - dispatched, deferred, suppressed, cancelled, stale, done: the job completes
 *   with the `DispatchResult` (a deferral lives on in its wake-up job).
 * - in flight elsewhere, or the lock expired before the deferral was recorded:
 *   the job is delayed by `inFlightRetryMs` (no attempt used) and tries again.
 * - a real failure: thrown, so BullMQ's attempts and backoff apply, counted
 *   across the stage's chain; the last one is unrecoverable.
 * - capacity deferral limit: `DeferralLimitError`, unrecoverable.
 * - malformed job data: unrecoverable; other jobs are unaffected.
 */
export function createProcessor<P>(
  dispatcher: Dispatcher<P>,
  store: DeferralStore,
  opts: ResolvedOptions<P>,
): Processor {
  return async (job: Job, token?: string): Promise<DispatchResult> => {
    let data;
    let sid: string;
    try {
      data = parseJobData(job.data, job.id);
      sid = stageId(refOf(data));
    } catch (error) {
      throw unrecoverable(error as Error);
    }
    const ref = refOf(data);
    const attempt = await dispatcher.attempt(
      ref,
      sid,
      data.payload as P,
      { buildId: data.buildId, force: false },
      { id: job.id as string, isWakeUp: data.wakeUp === true, attemptsMade: job.attemptsMade },
    );
    switch (attempt.kind) {
      case 'in_flight':
      case 'lost':
        await job.moveToDelayed(Date.now() + opts.inFlightRetryMs, token);
        throw new DelayedError();
      case 'limit':
        if (data.wakeUp) await store.markFailed(sid, job.id as string);
        throw unrecoverable(new DeferralLimitError(ref, attempt.result.reason ?? '', attempt.chain.capacity));
      case 'failed': {
        const error =
          attempt.error instanceof Error
            ? attempt.error
            : new DispatchFailedError(ref, attempt.result.reason ?? 'unknown');
        const spent = attempt.chain.failures + job.attemptsMade + 1;
        if (spent < opts.retry.attempts && !(error instanceof UnrecoverableError)) throw error;
        if (data.wakeUp) await store.markFailed(sid, job.id as string);
        throw unrecoverable(error);
      }
      default:
        return attempt.result;
    }
  };
}
