import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { fetchBy, stallFailingWorker } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * A wake-up that BullMQ failed by itself (stalled past maxStalledCount on a Worker the app did not
 * attach: no FAIL ran, its licence stays behind) is a job failed for good like any other. The next
 * begin of the stage drops that licence and keeps the job's failed-job record (batch.lua's begin,
 * "one BullMQ failed by itself ... becomes that job's record"), so a later retry by hand of the
 * wake-up runs with a fresh chain and sends the stage (C16: "Retry of a failed job dispatches the
 * stage with a fresh chain"). Without the record the retried wake-up finds no licence and
 * completes as `stale_wake_up`, sending nothing.
 */
const image: StageRef = { scope: ['stalled', 'wake-up', 'retried'], stage: 'image' };

describe('C16: retry by hand of a wake-up BullMQ failed by itself', () => {
  it('C16: a wake-up failed as stalled on an unattached Worker, retried by hand after the stage was enqueued and sent again, dispatches the stage with a fresh chain', async () => {
    const h = harness({ windows: { capacitySeconds: 1, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT, SENT);
    expect((await h.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the window ended', 5000);
    // a worker takes the wake-up and freezes: BullMQ's lock of it (300 ms) is never renewed
    const frozen = await fetchBy(h, 'frozen-token', 300);
    expect(frozen.id).toMatch(/@cap\./);
    // the app's own Worker, not attached; its stalled check fails the wake-up (maxStalledCount 0)
    const { worker: own, done, failed } = stallFailingWorker(h);
    try {
      await waitFor(() => failed.length === 1, 'BullMQ failed the stalled wake-up', 10_000);
      expect((await h.engine.enqueue(image, {})).added).toBe(true);
      await waitFor(() => done.length === 1, 'the enqueued job ran', 10_000);
      expect(done[0]!.result.reason).toBeNull();
      // the operator retries the failed wake-up (Bull Board's Retry)
      const wakeUp = await h.engine.queue.getJob(frozen.id!);
      await wakeUp!.retry('failed');
      await waitFor(() => done.length === 2, 'the retried wake-up ran', 10_000);
      expect({
        id: done[1]!.id,
        reason: done[1]!.result.reason,
        calls: h.executor.callsFor(image),
      }).toEqual({ id: frozen.id, reason: null, calls: 3 });
    } finally {
      await own.close();
    }
  }, 30_000);
});
