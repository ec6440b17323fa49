import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * C9: cancel removes (or marks) a waiting job of the stage. A kept completed job retried by hand
 * (Bull Board's Retry with `removeOnComplete: false`) waits for its stage: a cancel must reach it.
 */
describe('C9: cancel reaches a kept completed job retried by hand', () => {
  it('C9: after cancelStage the retried job does not dispatch the stage', async () => {
    const h = harness({ removeOnComplete: false });
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    const worker = h.engine.createWorker({ concurrency: 1 });
    const { done } = watch(worker);
    await waitFor(() => done.length === 1 || null, 'the first dispatch');
    await worker.close();

    const kept = (await h.engine.queue.getJobs(['completed']))[0]!;
    await kept.retry('completed');
    const cancelled = await h.engine.cancelStage(image);

    // the cancel removes the job it reached (or, if it ran first, the job completes as cancelled)
    const again = watch(h.engine.createWorker({ concurrency: 1 }));
    const settled = await waitFor(async () => {
      const job = await h.engine.queue.getJob(kept.id!);
      if (!job) return 'removed';
      return (await job.isCompleted()) ? (job.returnvalue as { reason?: string }).reason : null;
    }, 'the retried job removed or finished');
    expect({ removedJobs: cancelled.removedJobs, settled }).toEqual({ removedJobs: 1, settled: 'removed' });
    expect(again.done).toEqual([]);
    expect(h.executor.calls).toHaveLength(1);
  });
});
