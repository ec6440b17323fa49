import { Queue, Worker } from 'bullmq';
import IORedis, { Cluster } from 'ioredis';
import { createDispatchEngine, UnsupportedConnectionError, type DispatchEngineOptions } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import {
  client,
  closeClients,
  dropPrefix,
  isolated,
  keysUnder,
  onCluster,
  redisOptions,
  waitFor,
} from '../../helpers/redis';

/**
 * Check of as a user who already runs BullMQ: connections BullMQ
 * takes in shapes the engine must refuse clearly, and the processor on a
 * user's own Worker.
 */
const ref = { scope: ['book-1'], stage: 'image' };
const executor = async () => ({ dispatched: true, jobs: 1, reason: null });

function options(connection: unknown): DispatchEngineOptions {
  return { connection: connection as never, ...isolated(), executor };
}

/** What createDispatchEngine threw (undefined: it made an engine, closed again here). */
async function refusal(opts: DispatchEngineOptions): Promise<unknown> {
  try {
    const engine = createDispatchEngine(opts);
    await engine.close();
    return undefined;
  } catch (error) {
    return error;
  }
}

afterEach(closeClients);

describe('C25: an ioredis keyPrefix (BullMQ: "use the prefix option instead")', () => {
  (onCluster ? it.skip : it)(
    'connection options with keyPrefix are refused at start-up with UNSUPPORTED_CONNECTION, nothing written',
    async () => {
      // BullMQ itself only refuses a client instance with keyPrefix; given as options the
      // engine's keys and BullMQ's split between '<keyPrefix><prefix>:' and '<prefix>:', jobs
      // then fail to finish ("Missing key for job ... moveToFinished") and stay active
      const opts = options({ ...redisOptions(), keyPrefix: 'kp:' });
      const error = await refusal(opts);
      const redis = client();
      const written = [...(await keysUnder(redis, opts.prefix!)), ...(await keysUnder(redis, `kp:${opts.prefix!}`))];
      await dropPrefix(redis, opts.prefix!);
      await dropPrefix(redis, `kp:${opts.prefix!}`);
      expect(error).toBeInstanceOf(UnsupportedConnectionError);
      expect(error).toMatchObject({ code: 'UNSUPPORTED_CONNECTION', message: expect.stringMatching(/keyPrefix/) });
      expect(written).toEqual([]);
    },
  );

  it('an ioredis client with keyPrefix is refused with UNSUPPORTED_CONNECTION, not an untyped BullMQ Error', async () => {
    const redis = new IORedis({ ...redisOptions(), keyPrefix: 'kp:', lazyConnect: true });
    try {
      const error = await refusal(options(redis));
      expect(error).toBeInstanceOf(UnsupportedConnectionError);
      expect(error).toMatchObject({ code: 'UNSUPPORTED_CONNECTION', message: expect.stringMatching(/keyPrefix/) });
    } finally {
      redis.disconnect();
    }
  });

  it('an ioredis Cluster with keyPrefix is refused with UNSUPPORTED_CONNECTION', async () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true, keyPrefix: 'kp:' });
    try {
      const error = await refusal({ ...options(cluster), prefix: '{kp}' });
      expect(error).toBeInstanceOf(UnsupportedConnectionError);
      expect(error).toMatchObject({ code: 'UNSUPPORTED_CONNECTION', message: expect.stringMatching(/keyPrefix/) });
    } finally {
      cluster.disconnect();
    }
  });
});

describe("C25: engine.processor on a user's own Worker", () => {
  (onCluster ? it.skip : it)(
    "a Worker on another prefix than the engine's fails the job with a clear typed error instead of deferring the stage into a queue it never reads",
    async () => {
      const h = harness({ windows: { capacitySeconds: 0.2, jitter: 0 } });
      h.executor.script(ref, notSent('no_worker_available'));
      // the user's own BullMQ setup: same queue name, their own prefix (the README repeats both by hand)
      const other = isolated().prefix;
      const queue = new Queue(h.queueName, { connection: redisOptions(), prefix: other });
      const worker = new Worker(h.queueName, h.engine.processor, {
        connection: { ...redisOptions(), maxRetriesPerRequest: null },
        prefix: other,
      });
      const { done, failed } = watch(worker);
      try {
        await queue.add(ref.stage, { v: 1, scope: ref.scope, stage: ref.stage, payload: null });
        await waitFor(() => done.length + failed.length === 1, 'the job to finish');
        // the engine's deferral (marker, licence, wake-up) would be in the engine's queue: no
        // Worker reads it, and this Worker's stage is never woken
        expect(await h.engine.listDeferred()).toEqual([]);
        expect(done).toEqual([]);
        expect(failed).toHaveLength(1);
        expect(failed[0]!.error).toMatchObject({
          code: expect.any(String),
          message: expect.stringContaining(`${h.prefix}:${h.queueName}`),
        });
        // and says what to do, in full
        expect(failed[0]!.error.message).toBe(
          `Dispatch job ${failed[0]!.id} comes from queue ${other}:${h.queueName}, but this engine's queue is ` +
            `${h.prefix}:${h.queueName}: run engine.processor on a Worker with the engine's queueName and prefix ` +
            '(or use engine.createWorker()), where its deferrals and wake-ups are',
        );
        expect(h.executor.calls).toEqual([]);
      } finally {
        await worker.close();
        await queue.close();
        await dropPrefix(client(), other);
      }
    },
  );
});
