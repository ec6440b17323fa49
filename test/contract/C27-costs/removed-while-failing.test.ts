import { harness } from '../../helpers/engine';
import { fast, latch, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';
import type { StageRef } from '../../../src';

const image: StageRef = { scope: ['book-42', 'ch-1', 'sc-1'], stage: 'image' };

/**
 * C27: nothing is kept for a stage that is not deferred, in flight, waiting out a retry or failed
 * for good. A job whose hash an operator deletes while its executor runs (redis-cli DEL: BullMQ
 * will not remove a locked job), whose attempt then fails for real with retries left, would hold
 * the stage while it waits out its retry; it no longer exists and will not run again, so its
 * failure takes no licence (batch.lua's hold release).
 */
describe('C27: a job deleted by hand while its attempt fails for real', () => {
  it('C27: its failure takes no licence: nothing of the stage is kept', async () => {
    const entered = latch();
    const fail = latch();
    const h = harness({
      retry: { attempts: 3, backoff: fast },
      executor: async () => {
        entered.open();
        await fail.opened;
        throw new Error('downstream 500');
      },
    });
    const { jobId } = await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    watch(worker);
    const errors: Error[] = [];
    worker.on('error', (e) => errors.push(e));
    await entered.opened;
    const jobKey = `${h.prefix}:${h.queueName}:${jobId!}`;
    await h.redis.del(jobKey, `${jobKey}:lock`);
    fail.open();
    await waitFor(() => errors.length > 0, "BullMQ's refusal to move the deleted job");
    expect(await keptFor(h, image)).toEqual([]);
  });
});
