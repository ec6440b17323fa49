import { Worker } from 'bullmq';
import IORedis, { Cluster } from 'ioredis';
import { workerConnection } from '../../../src/engine';
import { harness } from '../../helpers/engine';
import { fetchBy, watch } from '../../helpers/jobs';
import { retriedAfterCancel } from '../../helpers/observe';
import { redisOptions, waitFor } from '../../helpers/redis';
import { keptFor, keptNaming } from '../../helpers/visible';

/**
 * Behaviours of src/engine.ts that mutants of it survived (docs/testing.md,
 * "Surviving mutants"): each test fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-1'], stage: 'image' };

describe('C25: createWorker', () => {
  it('`autorun: false` is kept: the worker fetches nothing until the host calls run()', async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker({ autorun: false });
    // the engine is ready (what an autorun worker waits for), and every callback queued on it has run
    await h.engine.waitUntilReady();
    await new Promise((resolve) => setImmediate(resolve));
    expect(worker.isRunning()).toBe(false);
    expect(h.executor.calls).toHaveLength(0);
    void worker.run();
    await waitFor(() => h.executor.calls.length === 1, 'the job, once the host runs the worker');
  });
});

/** A client the user passes in; the duplicates the engine makes of it are recorded (and `patch`ed). */
function userClient(patch: (c: IORedis) => void = () => undefined) {
  const own = new IORedis({ ...redisOptions(), maxRetriesPerRequest: null });
  const made: IORedis[] = [];
  const duplicate = own.duplicate.bind(own);
  own.duplicate = (...args: Parameters<IORedis['duplicate']>) => {
    const c = duplicate(...args);
    patch(c);
    made.push(c);
    return c;
  };
  return { own, made };
}

describe('C25: the workers the engine makes', () => {
  it("close() closes the engine's workers and the connection it duplicated for them", async () => {
    const { own, made } = userClient();
    try {
      const h = harness({ connection: own });
      const worker = h.engine.createWorker();
      await worker.waitUntilReady();
      expect(made).toHaveLength(1);
      const dup = made[0]!;
      await h.engine.close();
      expect(worker.isRunning()).toBe(false);
      expect(worker.closing).toBeTruthy();
      await waitFor(() => dup.status === 'end', 'the duplicate closed');
      // the user's client is the user's to close
      expect(own.status).toBe('ready');
    } finally {
      own.disconnect();
    }
  });

  it('a duplicated connection whose quit() fails is disconnected', async () => {
    // as with `enableOfflineQueue: false` and Redis unreachable: quit() rejects, the client lives on
    const { own, made } = userClient((c) => {
      c.quit = () => Promise.reject(new Error("Stream isn't writeable"));
    });
    try {
      const h = harness({ connection: own });
      await h.engine.createWorker().waitUntilReady();
      await h.engine.close();
      await waitFor(() => made[0]!.status === 'end', 'the duplicate disconnected');
    } finally {
      own.disconnect();
    }
  });

  it('a worker the host started and is closing when the engine starts it is not started again', async () => {
    const h = harness();
    // ready first: the engine's start then runs a few microtasks after createWorker, while the
    // host's run() (synchronous up to its first await) holds the worker and its close() waits on Redis
    await h.engine.waitUntilReady();
    const worker = h.engine.createWorker();
    const errors: Error[] = [];
    worker.on('error', (e) => errors.push(e));
    // BullMQ's run() refuses a worker still running before it looks at closing: the engine must not call it
    void worker.run().catch(() => undefined);
    const closing = worker.close();
    await closing;
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual([]);
  });

  it("when the worker's start fails, the error goes to its 'error' listeners, and nowhere without one", async () => {
    const h = harness();
    // (an unhandled rejection would fail the test by itself: jest reports it)
    const run = jest.spyOn(Worker.prototype, 'run');
    try {
      // the engine's own start of the worker fails (BullMQ's run() rejects)
      run.mockRejectedValueOnce(new Error('start refused'));
      const heard = h.engine.createWorker();
      const errors: Error[] = [];
      heard.on('error', (e) => errors.push(e));
      await waitFor(() => errors.length === 1, "the worker's error event");
      expect(errors[0]!.message).toBe('start refused');
      // with no listener, BullMQ's emit of 'error' would throw, catch it and print it
      const printed = jest.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        run.mockRejectedValueOnce(new Error('start refused'));
        h.engine.createWorker();
        await h.engine.waitUntilReady();
        await new Promise((resolve) => setImmediate(resolve));
        expect(printed).not.toHaveBeenCalled();
      } finally {
        printed.mockRestore();
      }
    } finally {
      run.mockRestore();
    }
  });

  it('a job BullMQ fails for good by itself (stalled) is recorded: enqueue adds a new job for its stage, and a cancel reaches the failed one', async () => {
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

describe("C25: a Worker's connection", () => {
  it('a Cluster the host passed is duplicated with its own redisOptions and maxRetriesPerRequest null', () => {
    // a lazy Cluster: a real ioredis object that never connects (nothing is fetched here)
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      lazyConnect: true,
      redisOptions: { password: 'kept', maxRetriesPerRequest: 20 },
    });
    const { connection, owned } = workerConnection(cluster as never);
    try {
      expect(connection).toBe(owned);
      expect(connection).not.toBe(cluster);
      const dup = connection as unknown as Cluster;
      expect(dup.isCluster).toBe(true);
      expect(dup.options.redisOptions).toMatchObject({ password: 'kept', maxRetriesPerRequest: null });
    } finally {
      (owned as unknown as Cluster | undefined)?.disconnect();
      cluster.disconnect();
    }
  });

  it('plain options get maxRetriesPerRequest null and nothing is made to close', () => {
    const { connection, owned } = workerConnection({ host: '127.0.0.1', port: 1 });
    expect(owned).toBeUndefined();
    expect(connection).toEqual({ host: '127.0.0.1', port: 1, maxRetriesPerRequest: null });
  });
});
