import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { fetchBy, stallFailingWorker } from '../../helpers/jobs';
import { probe } from '../../helpers/visible';
import type { StageRef } from '../../../src';

/**
 * A wake-up is picked by a worker that then freezes twice
 * past BullMQ's lock (a GC pause, a crash): BullMQ's stalled check fails it by itself
 * ("job stalled more than allowable limit"). The app runs `engine.processor` on a Worker of
 * its own that it did not attach (`attachWorker` is optional: README). Then the stage is enqueued
 * again. Contract C14: "Every crash point of a worker leaves an active job BullMQ redelivers or a
 * wake-up"; C18: enqueue adds a job when the stage has none waiting, running or deferred; the
 * published probe answers "nothing pending: add the job". Expected: that job dispatches the stage.
 */
const image: StageRef = { scope: ['stalled', 'wake-up'], stage: 'image' };

describe('C14: a wake-up failed by BullMQ itself', () => {
  it('C14: after a wake-up stalled past maxStalledCount on an unattached Worker, the stage enqueued again is dispatched (not superseded by the failed wake-up)', async () => {
    const h = harness({ windows: { capacitySeconds: 1, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    expect((await h.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the window ended', 5000);
    // a worker takes the wake-up and freezes: BullMQ's lock of it (300 ms) is never renewed
    const frozen = await fetchBy(h, 'frozen-token', 300);
    expect(frozen.id).toMatch(/@cap\./);
    // the app's own Worker, not attached; its stalled check fails the wake-up (maxStalledCount 0)
    const { worker: own, done, failed } = stallFailingWorker(h);
    try {
      await waitFor(() => failed.length === 1, 'BullMQ failed the stalled wake-up', 10_000);
      // the published probe: nothing pending, add the job
      expect(await probe(h, image)).toEqual({ kind: 'none' });
      const added = await h.engine.enqueue(image, {});
      expect(added.added).toBe(true);
      await waitFor(() => done.length === 1, 'the enqueued job ran', 10_000);
      expect({ result: done[0]!.result.reason, calls: h.executor.callsFor(image) }).toEqual({
        result: null,
        calls: 2,
      });
    } finally {
      await own.close();
    }
  }, 30_000);
});
