import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { crashAfterFail, settledState } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * A wake-up fails for good (the processor's FAIL recorded it) and its worker dies before BullMQ
 * failed the job: BullMQ redelivers it. A job that failed for good and runs again is not told
 * apart from a retry by hand: it starts a fresh chain and has the attempts BullMQ left it (the
 * crashed failure was never counted by BullMQ: all 3), so it fails for good after 3 more calls.
 * Chain: the enqueued job fails twice (2 of 3), then capacity: its wake-up carries failures 2;
 * the wake-up's failure is the 3rd of 3 (FAIL, then the crash).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C11: the retry budget of a wake-up redelivered after a crash between FAIL and BullMQ failing it', () => {
  it('a wake-up redelivered after its final FAIL starts a fresh chain with the attempts BullMQ left it, then fails for good', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(
      image,
      new Error('500 a'),
      new Error('500 b'),
      notSent('no_worker_available'),
      new Error('500 c'), // the wake-up's, the 3rd of 3: FAIL, then the crash
      new Error('500 d'), // the redelivery's: a fresh chain, BullMQ's 3 attempts
      new Error('500 e'),
      new Error('500 f'),
      new Error('500 g'),
      new Error('500 h'),
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
        calls: 7,
      });
    } finally {
      await worker.close();
    }
  }, 30_000);
});
