import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { crashAfterFail, settledState } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * CHANGELOG: a wake-up redelivered after a crash
 * between its failed-for-good record and BullMQ's failure "runs once more and fails again";
 * a fix: such a redelivery gets no fresh retry budget. For a wake-up that carried a
 * chain's failures in its licence, the budget restarts anyway: FAIL (the processor's) dropped its
 * licence, so the redelivery's begin (src/lua/scripts.ts, begin ~l.312: let past the stale check
 * with `lic` nil) returns an empty licence, `chainOf` (src/dispatch.ts:710) starts FRESH_CHAIN,
 * and the job's own count (`atm - sdb + sdx`) is 0: the redelivered wake-up's failure is the 1st
 * of its chain, not the 4th of 3. It is retried (BullMQ, `attempts` 3) instead of failing for
 * good: the stage is tried again past its budget (here 2 extra executor calls, and the same path
 * resets the chain's capacity count against `maxCapacityDeferrals`).
 * Chain: the enqueued job fails twice (2 of 3), then capacity: its wake-up carries failures 2;
 * the wake-up's failure is the 3rd of 3 (FAIL, then the crash).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C11: the retry budget of a wake-up redelivered after a crash between FAIL and BullMQ failing it', () => {
  it("a wake-up redelivered after its final FAIL runs once more on its chain's budget and fails for good (was a fresh budget: retried past it)", async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(
      image,
      new Error('500 a'),
      new Error('500 b'),
      notSent('no_worker_available'),
      new Error('500 c'), // the wake-up's, the 3rd of 3: FAIL, then the crash
      new Error('500 d'), // the redelivery's: it runs once more and fails for good
      new Error('500 e'),
      new Error('500 f'),
      new Error('500 g'),
    );
    const { worker, crashed } = crashAfterFail(
      h,
      // the wake-up's final failure: it fails for good (FAIL recorded it), as BullMQ is told
      (job, error) => job.data.class !== undefined && error.name === 'UnrecoverableError',
    );
    try {
      await h.engine.enqueue(image, {});
      await waitFor(() => h.engine.isStageDeferred(image), 'deferred', 10_000);
      expect(h.executor.callsFor(image)).toBe(3);
      // woken, not cleared: its chain (2 failures) goes on (a clear would start a fresh one)
      await h.engine.wakeDeferred({ stage: image.stage });
      await waitFor(() => crashed.job !== undefined, 'the wake-up failed for good, then the crash', 10_000);
      const state = await settledState(h.engine.queue, crashed.job!.id!);
      expect({ state, calls: h.executor.callsFor(image) }).toEqual({
        state: 'failed',
        calls: 5,
      });
    } finally {
      await worker.close();
    }
  }, 30_000);
});
