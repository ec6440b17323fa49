import { waitFor } from '../../helpers/redis';
import { failedForGood } from '../../helpers/attempts';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C9: a cancel after a terminal failure', () => {
  it('keeps the failed job as a record, and a retry by hand then stops as cancelled', async () => {
    const { h, done } = await failedForGood();
    const calls = h.executor.calls.length;
    await h.engine.cancelActiveDispatch(image);
    const [job] = await h.engine.queue.getJobs(['failed']);
    expect(job).toBeDefined();
    await job!.retry('failed');
    await waitFor(() => done.length === 2, 'retried job completed');
    expect(done[1]!.result).toMatchObject({ reason: 'cancelled', cancelled: true, retryable: false });
    expect(h.executor.calls).toHaveLength(calls);
  });
});
