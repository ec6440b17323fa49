import { harness } from '../../helpers/engine';
import { fetchBy, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptNaming } from '../../helpers/visible';

const image = { scope: ['book-14', 'ch-1'], stage: 'image' };

describe('C19: a job that breaks the contract, failed for good by BullMQ (stalled)', () => {
  it.each([
    ['no scope', { stage: 'image' }],
    ['no stage', { scope: ['book-14'] }],
  ])('a job with %s that BullMQ fails for good leaves nothing behind', async (_what, data) => {
    const h = harness();
    // both stall; the odd job's lock lapses long before the valid job's, so the odd job fails first
    // and its record, had it one, is written (on the same connection) before the valid job's
    await h.engine.queue.add('image', { v: 1, payload: {}, ...data }, { jobId: 'the-odd-one' });
    await fetchBy({ queueName: h.queueName, prefix: h.prefix }, 'frozen', 200);
    const { jobId } = await h.engine.enqueue(image, {});
    await fetchBy({ queueName: h.queueName, prefix: h.prefix }, 'frozen', 3000);
    const worker = h.engine.createWorker({ stalledInterval: 300, maxStalledCount: 0 });
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 2, 'both stalled jobs failed for good');
    expect(failed[0]!.id).toBe('the-odd-one');
    await waitFor(async () => (await keptNaming(h, jobId!)).length > 0, 'the valid job recorded');
    // nothing the engine keeps names the odd job (BullMQ's own hash of it aside)
    expect(await keptNaming(h, 'the-odd-one')).toEqual([]);
  });
});
