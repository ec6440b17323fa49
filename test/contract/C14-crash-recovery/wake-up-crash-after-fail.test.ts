import { UnrecoverableError } from 'bullmq';
import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { crashAfterFail, settledState } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Commit b5526de/7fce5db (BATCH's begin, src/lua/scripts.ts ~l.296): a run of a job
 * recorded `<member>?` whose stalled count grew since FAIL's `sdt` is a redelivery, "not a retry
 * by hand". For a WAKE-UP that is a dead end: FAIL (the processor's, before BullMQ fails the job)
 * already turned its licence into the `?` record, so the redelivery is neither retried nor the
 * licence holder, and begin answers `{3}` stale (`wake == 'w' and not retried and lic ~= me`).
 * The redelivered wake-up COMPLETES as `stale_wake_up` (and is removed: removeOnComplete): the
 * stage's failure vanishes from BullMQ's failed list, nothing is left for an operator to retry
 * (README: "a job that fails for good stays as the record a cancel and a retry by hand reach"),
 * and its `?` record names a job that no longer exists. A plain job in the same spot runs once
 * more and fails for good (a test): BullMQ's own behaviour on such a crash.
 * The crash is simulated as a test: after the processor threw the final failure, the
 * wrapper drops BullMQ's lock and waits for the stalled check before the error reaches BullMQ.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C14: a wake-up whose worker crashes between FAIL and BullMQ failing it', () => {
  it('a wake-up redelivered after a crash between its final FAIL and BullMQ failing it runs once more and fails for good (was stale_wake_up: its failure vanished)', async () => {
    const h = harness();
    h.executor.script(
      image,
      notSent('no_worker_available'),
      new UnrecoverableError('downstream rejects the stage'),
      new UnrecoverableError('downstream rejects the stage again'),
    );
    const { worker, crashed } = crashAfterFail(h, (_job, error) => error.name === 'UnrecoverableError');
    const completedAs: string[] = [];
    worker.on(
      'completed',
      (job, r) => void (job.id === crashed.job?.id && completedAs.push((r as { reason: string }).reason)),
    );
    try {
      await h.engine.enqueue(image, {});
      await waitFor(() => h.engine.isStageDeferred(image), 'deferred', 10_000);
      await h.engine.clearDeferrals(image.scope);
      await waitFor(() => crashed.job !== undefined, 'the wake-up failed for good, then the crash', 10_000);
      const state = await settledState(h.engine.queue, crashed.job!.id!);
      expect({ state, calls: h.executor.callsFor(image), completedAs }).toEqual({
        state: 'failed',
        calls: 3,
        completedAs: [],
      });
    } finally {
      await worker.close();
    }
  }, 30_000);
});
