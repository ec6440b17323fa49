import { UnrecoverableError } from 'bullmq';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { crashAfterFail, settledState } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Commit 195572b (BATCH's begin, src/lua/scripts.ts ~l.312): "a wake-up redelivered
 * after its failed-for-good record ... runs once more" (`not (failedMe and redelivered)` lets it
 * past the stale check). The wake-up's final failure was released plain and FAIL turned its
 * licence into the `W?` record: nothing is in flight, no licence stands. A host's tick
 * (`dispatchStage`, the README's data flow) sends the stage meanwhile; its release (mode '1')
 * revokes licences and marks their jobs superseded, but keeps a `?` record whose job still
 * exists and never marks that job (src/lua/scripts.ts release, ~l.430). When BullMQ's stalled
 * check then hands the crashed wake-up on, begin lets it past the stale check (it is no longer
 * the licence, not retried by hand) and it dispatches the stage AGAIN: sent twice, with no
 * operator involved. Before 195572b it completed stale (a check found its failure vanished);
 * the fix traded a vanished failure for a second send. A stage whose chain ended by a success
 * elsewhere must not be sent again by a redelivery of a job that had already given up on it.
 * The crash is simulated as a test: after the processor threw the final failure, the
 * wrapper (the host's tick runs here) drops BullMQ's lock and waits for the stalled check.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C14: a wake-up redelivered after a crash between FAIL and BullMQ failing it', () => {
  it("a stage is sent twice when a host dispatches it directly between a wake-up's final FAIL and the crash redelivery of that wake-up", async () => {
    const h = harness();
    h.executor.script(
      image,
      notSent('no_worker_available'),
      new UnrecoverableError('downstream rejects the stage'),
      SENT, // the host's direct dispatch
      SENT, // the redelivered wake-up (should never be called)
    );
    let direct: unknown;
    const { worker, crashed } = crashAfterFail(
      h,
      (_job, error) => error.name === 'UnrecoverableError',
      // a host's tick dispatches the stage directly: no lock, no marker, no licence stand
      async () => (direct = await h.engine.dispatchStage(image, {})),
    );
    try {
      await h.engine.enqueue(image, {});
      await waitFor(() => h.engine.isStageDeferred(image), 'deferred', 10_000);
      await h.engine.clearDeferrals(image.scope);
      await waitFor(() => direct !== undefined, 'the wake-up failed for good, the host dispatched', 10_000);
      expect((direct as { dispatched: boolean }).dispatched).toBe(true);
      await settledState(h.engine.queue, crashed.job!.id!);
      const sent = h.executor.callsOf(image).filter((c) => c.result?.dispatched).length;
      expect({ sent, calls: h.executor.callsFor(image) }).toEqual({ sent: 1, calls: 3 });
    } finally {
      await worker.close();
    }
  }, 30_000);
});
