import { Worker } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * BullMQ's manual rate limit (docs.bullmq.io "Manual rate-limit"): the processor calls
 * `worker.rateLimit(ms)` and throws `Worker.RateLimitError()`; BullMQ (6.7: by the error's
 * message) moves the job back to wait and spends no attempt. An executor behind the engine does
 * the same when its downstream says "slow down".
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

function rateLimited(worker: () => Worker, ms: number) {
  return async () => {
    await worker().rateLimit(ms);
    throw Worker.RateLimitError();
  };
}

describe('C5: Worker.RateLimitError thrown by the executor', () => {
  it('Worker.RateLimitError spends no attempt: with attempts 2 the second real failure fails the job for good (2 real failures, 3 calls)', async () => {
    const h = harness({ retry: { attempts: 2, backoff: fast } });
    // eslint-disable-next-line prefer-const -- set once the Worker exists (the executor reads it)
    let worker!: Worker;
    h.executor.script(
      image,
      new Error('down #1'),
      rateLimited(() => worker, 100), // spends nothing (BullMQ's rule)
      new Error('down #2'), // the chain's 2nd real failure: attempts 2 spent, fails for good
      new Error('down #3'),
      SENT,
    );
    const { jobId } = await h.engine.enqueue(image, {});
    worker = h.engine.createWorker();
    const { done } = watch(worker);
    await waitFor(
      async () => ['failed', 'completed', 'unknown'].includes(await h.engine.queue.getJobState(jobId!)),
      'finished',
      8000,
    );
    // after 2 real failures of a budget of 2 the job is failed for good; the executor saw 3 calls
    expect(await h.engine.queue.getJobState(jobId!)).toBe('failed');
    expect(h.executor.calls).toHaveLength(3);
    expect(done).toHaveLength(0);
  });

  it('a rate limit is no failure: no engine `failed` event, the job goes back to wait and dispatches once', async () => {
    const h = harness({ retry: { attempts: 3, backoff: fast } });
    // eslint-disable-next-line prefer-const -- set once the Worker exists (the executor reads it)
    let worker!: Worker;
    const failedEvents: { reason: string }[] = [];
    h.engine.on('failed', (e) => failedEvents.push(e));
    h.executor.script(
      image,
      rateLimited(() => worker, 100),
    );
    await h.engine.enqueue(image, {});
    worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => done.length >= 1, 'dispatched', 8000);
    // BullMQ itself: no failure at all (the job went back to wait), then dispatched once
    expect(failed).toHaveLength(0);
    expect(done[0]?.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(2);
    expect(failedEvents).toEqual([]);
  });
});
