import { expectUnwritten, harness, snapshot } from '../../helpers/engine';
import { fetchBy } from '../../helpers/jobs';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C13: the processor and BullMQ's lock of the job", () => {
  it('a worker whose BullMQ lock of the job lapsed before its dispatch began begins nothing: DelayedError, the job left active for BullMQ, nothing written', async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const job = await fetchBy(h, 'bull-1');
    await h.redis.del(`${h.prefix}:${h.queueName}:${job.id!}:lock`);
    const before = await snapshot(h.redis, h.prefix);
    await expect(h.engine.processor(job, 'bull-1')).rejects.toMatchObject({ name: 'DelayedError' });
    expect(h.executor.callsFor(image)).toBe(0);
    expect(await h.engine.queue.getJobState(job.id!)).toBe('active');
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
  });

  it("BullMQ's token '0' (no lock: BullMQ's scripts check none) is a job without a token, and the job is dispatched", async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const job = await fetchBy(h, '0');
    expect(await h.redis.exists(`${h.prefix}:${h.queueName}:${job.id!}:lock`)).toBe(0);
    expect(await h.engine.processor(job, '0')).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(image)).toBe(1);
  });

  it("C13: a job run with BullMQ's token '0' (a lock tied to no BullMQ token) releases its own lock when it sends: its answer says no lockLost", async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const job = await fetchBy(h, '0');
    // its release finds its own lock (not tied to a BullMQ token) and reads nothing of BullMQ's lock of the job
    expect(await h.engine.processor(job, '0')).toEqual({
      dispatched: true,
      reason: null,
      retryable: false,
      result: { dispatched: true, jobs: 1, reason: null },
    });
  });
});
