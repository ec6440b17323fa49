import type { Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C12: a job that finds its stage in flight', () => {
  it('is re-delayed by inFlightRetryMs without spending an attempt (attemptsMade stays 0), then dispatches', async () => {
    // attempts: 1, so a job that spent an attempt would fail for good at once
    const h = harness({ inFlightRetryMs: 1500, retry: { attempts: 1, backoff: { type: 'fixed', delay: 0 } } });
    let open!: () => void;
    const latch = new Promise<void>((r) => (open = r));
    h.executor.script(image, async () => {
      await latch;
      return SENT;
    });
    const queued = await h.engine.enqueue(image, {});
    expect(queued.added).toBe(true);
    // a direct dispatch holds the stage in flight while the job is picked up
    const direct = h.engine.dispatchStage(image, {});
    await waitFor(() => h.executor.calls.length === 1, 'the direct dispatch to be in its executor');
    const failed: string[] = [];
    const completed: { id: string; attemptsMade: number; result: unknown }[] = [];
    const worker = h.engine.createWorker();
    worker.on('failed', (job) => failed.push(job?.id as string));
    worker.on('completed', (job: Job, result) =>
      completed.push({ id: job.id as string, attemptsMade: job.attemptsMade, result }),
    );
    const before = Date.now();
    const state = await waitFor(async () => {
      const now = await h.engine.queue.getJobState(queued.jobId!);
      return now === 'delayed' || now === 'failed' ? now : null;
    }, 'the job to be re-delayed (or to fail)');
    expect(state).toBe('delayed');
    const after = Date.now();
    const job = await h.engine.queue.getJob(queued.jobId!);
    expect(job!.attemptsMade).toBe(0);
    // due inFlightRetryMs after the worker found the stage in flight (BullMQ scores ms << 12)
    const due = Math.floor(Number(await h.redis.zscore(`${h.prefix}:${h.queueName}:delayed`, queued.jobId!)) / 4096);
    expect(due).toBeGreaterThanOrEqual(before + 1500 - 50);
    expect(due).toBeLessThanOrEqual(after + 1500 + 50);
    expect(h.executor.calls).toHaveLength(1);

    open();
    expect(await direct).toMatchObject({ dispatched: true });
    await waitFor(() => completed.length === 1, 'the re-delayed job to run');
    // BullMQ counts the completing attempt itself: 1 means the in-flight round spent none
    expect(completed[0]).toMatchObject({ id: queued.jobId, attemptsMade: 1, result: { dispatched: true } });
    expect(failed).toEqual([]);
    expect(h.executor.calls).toHaveLength(2);
  });
});
