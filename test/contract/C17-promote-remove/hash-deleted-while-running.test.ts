import { harness } from '../../helpers/engine';
import { fast, latch, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C17: a job whose hash is deleted by hand while its executor runs', () => {
  it('its real failure makes no hash for it again (the release sets no chain on it, the engine counts no retry on it)', async () => {
    const entered = latch();
    const fail = latch();
    let calls = 0;
    const h = harness({
      retry: { attempts: 2, backoff: fast },
      executor: async () => {
        calls += 1;
        if (calls === 3) {
          entered.open();
          await fail.opened;
        }
        throw new Error(`down #${calls}`);
      },
    });
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 2, 'failed for good (2 of 2)');
    const [job] = await h.engine.queue.getJobs(['failed']);
    // retried by hand, attempts kept: BullMQ's count is spent, the chain's is not, so the engine retries it itself
    await job!.retry('failed');
    await entered.opened;
    const key = `${h.prefix}:${h.queueName}:${job!.id!}`;
    await h.redis.del(key); // an operator's DEL in redis-cli (BullMQ will not remove a locked job)
    const errors: Error[] = [];
    worker.on('error', (e) => errors.push(e));
    fail.open();
    await waitFor(() => errors.length > 0, "BullMQ's refusal to move the deleted job");
    expect(await h.redis.exists(key)).toBe(0);
  });
});
