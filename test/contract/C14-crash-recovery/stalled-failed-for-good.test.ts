import { harness } from '../../helpers/engine';
import { fetchBy, watch } from '../../helpers/jobs';
import { retriedAfterCancel } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';

const image = { scope: ['book-14', 'ch-1'], stage: 'image' };

describe('C14: a job whose worker froze, failed for good by BullMQ (stalled) on engine.createWorker()', () => {
  it('is recorded: enqueue adds a new job for its stage, and a cancel reaches the failed one', async () => {
    const h = harness();
    const { jobId } = await h.engine.enqueue(image, {});
    // a worker that froze past its lock: the job stalls, and maxStalledCount 0 fails it at once
    await fetchBy({ queueName: h.queueName, prefix: h.prefix }, 'frozen', 200);
    const worker = h.engine.createWorker({ stalledInterval: 300, maxStalledCount: 0 });
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the stalled job failed for good');
    expect(failed[0]!.id).toBe(jobId);
    // C27: a stage with a job failed for good keeps its record (what lets a cancel reach the job)
    await waitFor(async () => (await keptFor(h, image)).length > 0, 'the failed job recorded');
    const again = await h.engine.enqueue(image, {});
    expect(again.added).toBe(true);
    expect(again.jobId).not.toBe(jobId);
    await worker.close();
    // on record as failed for good: a cancel of the stage reaches it (retried by hand, it sends nothing)
    const retried = await retriedAfterCancel(h, image, jobId!);
    expect({ calls: retried.calls, failedAgain: retried.state === 'failed' }).toEqual({ calls: 0, failedAgain: false });
  });
});
