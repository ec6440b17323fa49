import { Worker } from 'bullmq';
import { Cluster } from 'ioredis';
import { workerConnection } from '../../../src/engine';
import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

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

describe('C25: the workers the engine makes', () => {
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
