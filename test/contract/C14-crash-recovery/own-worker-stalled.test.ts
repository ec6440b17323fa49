import { Worker } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { fetchBy, watch } from '../../helpers/jobs';
import { client, closeClients, dropPrefix, isolated, waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';
import { createDispatchEngine, type StageRef } from '../../../src';

/**
 * README "Register it in an existing BullMQ setup": `new Worker(queueName, engine.processor, …)`
 * is the first way shown. A job BullMQ fails for good by itself (stalled with `maxStalledCount: 0`,
 * or `maxStartedAttempts`) is recorded only by the 'failed' listener `engine.createWorker()` adds
 * (src/engine.ts): on the user's own Worker it is not, so a cancel does not reach it.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C14: the user's own Worker and a job BullMQ fails by itself", () => {
  it('stalled with maxStalledCount 0 on the own Worker: cancel, then a retry by hand does not dispatch the cancelled stage', async () => {
    const h = harness();
    const { jobId } = await h.engine.enqueue(image, {});
    await fetchBy({ queueName: h.queueName, prefix: h.prefix }, 'frozen', 200); // a worker froze past its lock
    const worker = new Worker(h.queueName, h.engine.processor, {
      connection: client({ maxRetriesPerRequest: null }),
      prefix: h.prefix,
      stalledInterval: 300,
      maxStalledCount: 0,
    });
    expect(h.engine.attachWorker(worker)).toBe(worker);
    try {
      const { failed, done } = watch(worker);
      await waitFor(() => failed.length === 1, 'the stalled job failed for good');
      expect(failed[0]!.id).toBe(jobId);
      // the engine keeps the failed job of the stage (C27), so that a cancel reaches it
      await waitFor(async () => (await keptFor(h, image)).length > 0, 'the failed job recorded');
      const cancel = await h.engine.cancelActiveDispatch(image, 'book withdrawn');
      expect(cancel.inFlight).toBe(false);
      await (await h.engine.queue.getJob(jobId!))!.retry('failed'); // an operator, Bull Board "Retry"
      await waitFor(() => done.length === 1, 'the retried job ran');
      // as with engine.createWorker(): a cancel reaches a job that failed for good
      expect({ calls: h.executor.calls.length, result: done[0]!.result }).toMatchObject({
        calls: 0,
        result: { cancelled: true },
      });
    } finally {
      await worker.close();
    }
  });

  it('the same on engine.createWorker(): the retried job completes cancelled, no executor call', async () => {
    const h = harness();
    const { jobId } = await h.engine.enqueue(image, {});
    await fetchBy({ queueName: h.queueName, prefix: h.prefix }, 'frozen', 200);
    const worker = h.engine.createWorker({ stalledInterval: 300, maxStalledCount: 0 });
    const { failed, done } = watch(worker);
    await waitFor(() => failed.length === 1, 'the stalled job failed for good');
    await waitFor(async () => (await keptFor(h, image)).length > 0, 'the failed job recorded');
    await h.engine.cancelActiveDispatch(image, 'book withdrawn');
    await (await h.engine.queue.getJob(jobId!))!.retry('failed');
    await waitFor(() => done.length === 1, 'the retried job ran');
    expect({ calls: h.executor.calls.length, result: done[0]!.result }).toMatchObject({
      calls: 0,
      result: { cancelled: true },
    });
  });

  it('attachWorker refuses a Worker of another queue or prefix (INVALID_OPTIONS), on a producer-only engine too', async () => {
    const h = harness();
    const other = new Worker(`${h.queueName}-other`, h.engine.processor, {
      connection: client({ maxRetriesPerRequest: null }),
      prefix: h.prefix,
      autorun: false,
    });
    const prefixed = new Worker(h.queueName, h.engine.processor, {
      connection: client({ maxRetriesPerRequest: null }),
      prefix: `${h.prefix}x`,
      autorun: false,
    });
    try {
      // the refusal names the Worker's queue and prefix and the engine's
      expect(() => h.engine.attachWorker(other)).toThrow(
        expect.objectContaining({
          code: 'INVALID_OPTIONS',
          message: expect.stringContaining(
            `runs queue "${h.queueName}-other" with prefix "${h.prefix}", the engine's queue is "${h.queueName}" with prefix "${h.prefix}"`,
          ),
        }),
      );
      expect(() => h.engine.attachWorker(prefixed)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }));
      const producer = harness({ executor: undefined });
      expect(() => producer.engine.attachWorker(other)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }));
    } finally {
      await other.close();
      await prefixed.close();
    }
  });

  it("attachWorker takes a Worker with BullMQ's default prefix on an engine with the default prefix", async () => {
    const { queueName } = isolated();
    const redis = client();
    const engine = createDispatchEngine<unknown, string>({
      connection: client(),
      queueName,
      executor: async () => SENT,
    });
    const worker = new Worker(queueName, engine.processor, {
      connection: client({ maxRetriesPerRequest: null }),
      autorun: false,
    });
    try {
      expect(engine.attachWorker(worker)).toBe(worker);
    } finally {
      await worker.close();
      await engine.close();
      await dropPrefix(redis, `bull:${queueName}`);
      await closeClients();
    }
  });
});
