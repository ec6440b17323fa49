import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as bullmq from 'bullmq';
import { Queue } from 'bullmq';
import IORedis, { Cluster } from 'ioredis';
import {
  createDispatchEngine,
  SUPPORTED_BULLMQ,
  UnsupportedBullMQError,
  UnsupportedConnectionError,
  type DispatchEngineOptions,
} from '../../../src';
import {
  bullmqVersion,
  checkConnection,
  checkQueue,
  isSupportedBullMQ,
  promote,
  redisClient,
} from '../../../src/bullmq/adapter';
import { harness, notSent, SENT } from '../../helpers/engine';
import { client, closeClients, isolated, keysUnder, onCluster, redisOptions, waitFor } from '../../helpers/redis';

// These run in every pair of the compatibility matrix (scripts/compat-matrix.sh): the
// `bullmq` and `ioredis` imported here are the pair's.
const manifestOf = (name: string) =>
  JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as Record<string, Record<string, string>>;
const installed = manifestOf('bullmq').version as unknown as string;
const ioredisMajor = Number((manifestOf('ioredis').version as unknown as string).split('.')[0]);
const image = { scope: ['book-1'], stage: 'image' };
const executor = async () => SENT;

/** Options for an engine that must never open: its own prefix, so a stray write would show. */
function refusedOptions(extra: Partial<DispatchEngineOptions> = {}): DispatchEngineOptions {
  return { connection: redisOptions(), ...isolated(), executor, ...extra };
}

/** The keys under `prefix` once every Queue the failed call made has closed (it closes them itself). */
async function keysLeft(close: jest.SpyInstance, prefix: string): Promise<string[]> {
  await Promise.all(close.mock.results.map((r) => (r.value as Promise<void>).catch(() => undefined)));
  return keysUnder(client(), prefix);
}

describe('C25: the supported BullMQ versions', () => {
  it('the range is 5.81 and later 5.x, and every 6.x', () => {
    expect(SUPPORTED_BULLMQ).toBe('^5.81.0 || ^6.0.0');
    for (const v of ['5.81.0', '5.81.5', '5.99.1', '6.0.0', '6.5.4', '6.7.0', '6.12.3'])
      expect([v, isSupportedBullMQ(v)]).toEqual([v, true]);
    for (const v of ['5.80.12', '5.9.0', '6.0.0-beta.1', '4.18.2', '7.0.0', '', 'x.y.z', undefined])
      expect([v, isSupportedBullMQ(v)]).toEqual([v, false]);
  });

  it('a version is read whole: multi-digit parts count, anything around or missing is refused', () => {
    for (const v of ['6.0.10', '5.81.12', '5.100.0', '6.10.0']) expect([v, isSupportedBullMQ(v)]).toEqual([v, true]);
    for (const v of [
      'v6.0.0',
      ' 6.0.0',
      '6.0.0 ',
      'bullmq:6.0.0',
      '6.0',
      '6.0.',
      '6..0',
      '.6.0.0',
      '6.0.0.1',
      '16.0.0',
      '56.0.0',
    ])
      expect([v, isSupportedBullMQ(v)]).toEqual([v, false]);
  });

  it("a queue whose meta values cannot be read has no version (undefined), and one stored as 'bullmq:<version>' gives the version", () => {
    const throwing = {
      get metaValues(): never {
        throw new Error('not ready');
      },
    };
    expect(bullmqVersion(throwing as never)).toBeUndefined();
    expect(bullmqVersion({ metaValues: { version: 'bullmq:6.7.0' } } as never)).toBe('6.7.0');
    expect(bullmqVersion({ metaValues: { version: '5.81.0' } } as never)).toBe('5.81.0');
    expect(bullmqVersion({ metaValues: { version: 6 } } as never)).toBeUndefined();
    expect(bullmqVersion({} as never)).toBeUndefined();
  });

  it('a client is told apart by all of its methods, not some: a partial shape is options, or not ioredis', () => {
    const client = { connect() {}, disconnect() {}, duplicate() {} };
    // options that happen to carry one client method are still options
    expect(() => checkConnection({ ...redisOptions(), connect() {} })).not.toThrow();
    // a client with only some of ioredis' own methods is not ioredis
    expect(() => checkConnection({ ...client, defineCommand() {} })).toThrow(/a client that is not ioredis/);
    expect(() => checkConnection({ ...client, defineCommand() {}, pipeline() {}, multi() {} })).not.toThrow();
    // node-redis needs sendCommand and isOpen/isReady; Bun's client send and connected: one alone is another client
    expect(() => checkConnection({ ...client, sendCommand() {} })).toThrow(/a client that is not ioredis/);
    expect(() => checkConnection({ ...client, isOpen: true })).toThrow(/a client that is not ioredis/);
    expect(() => checkConnection({ ...client, sendCommand() {}, isReady: true })).toThrow(/is a node-redis client;/);
    expect(() => checkConnection({ ...client, send() {} })).toThrow(/a client that is not ioredis/);
    expect(() => checkConnection({ ...client, connected: true })).toThrow(/a client that is not ioredis/);
  });

  it('a queue on a backend with no constructor name is refused as a non-Redis backend', () => {
    const queue = { metaValues: { version: `bullmq:${installed}` }, getBackend: () => Object.create(null) as object };
    expect(() => checkQueue(queue as never)).toThrow(
      expect.objectContaining({
        code: 'UNSUPPORTED_CONNECTION',
        message: expect.stringMatching(/^The connection is a BullMQ non-Redis backend;/),
      }),
    );
  });

  it('the keyPrefix refusal says what to do instead, in full', () => {
    expect(() => checkConnection({ ...redisOptions(), keyPrefix: 'kp:' })).toThrow(
      new UnsupportedConnectionError(
        'an ioredis connection with keyPrefix "kp:"',
        "BullMQ does not support ioredis' keyPrefix: drop it and use the engine's `prefix` option (and the same " +
          'on your Queues and Workers) instead',
      ),
    );
    expect(() => checkConnection({ ...redisOptions(), keyPrefix: 'kp:' })).toThrow(
      'The connection is an ioredis connection with keyPrefix "kp:"; BullMQ does not support ioredis\' keyPrefix: ' +
        "drop it and use the engine's `prefix` option (and the same on your Queues and Workers) instead",
    );
    // a Cluster's keyPrefix sits in its redisOptions
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      lazyConnect: true,
      redisOptions: { keyPrefix: 'c:' },
    });
    try {
      expect(() => checkConnection(cluster)).toThrow(/keyPrefix "c:"/);
    } finally {
      cluster.disconnect();
    }
  });

  it('the package.json peer range is the one the start-up check enforces', () => {
    const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as Record<
      string,
      Record<string, string>
    >;
    expect(manifest.peerDependencies).toMatchObject({ bullmq: SUPPORTED_BULLMQ, ioredis: '^5.11.0 || ^6.0.0' });
    expect(manifest.dependencies?.bullmq).toBeUndefined();
    expect(manifest.dependencies?.ioredis).toBeUndefined();
  });

  it('the version is read from the bullmq that made the queue, and it is supported', () => {
    const h = harness();
    expect(bullmqVersion(h.engine.queue)).toBe(installed);
    expect(isSupportedBullMQ(installed)).toBe(true);
  });

  it('an unsupported bullmq fails createDispatchEngine with UNSUPPORTED_BULLMQ, writing nothing', async () => {
    const meta = jest.spyOn(Queue.prototype, 'metaValues', 'get').mockReturnValue({ version: 'bullmq:5.80.3' });
    const close = jest.spyOn(Queue.prototype, 'close');
    const opts = refusedOptions();
    try {
      let error: unknown;
      try {
        createDispatchEngine(opts);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(UnsupportedBullMQError);
      expect(error).toMatchObject({ code: 'UNSUPPORTED_BULLMQ', version: '5.80.3', supported: SUPPORTED_BULLMQ });
      expect((error as Error).message).toMatch(
        /bullmq 5\.80\.3 is not supported: .* needs bullmq \^5\.81\.0 \|\| \^6\.0\.0/,
      );
      expect(close).toHaveBeenCalledTimes(1);
      expect(await keysLeft(close, opts.prefix!)).toEqual([]);
    } finally {
      meta.mockRestore();
      close.mockRestore();
      await closeClients();
    }
  });
});

describe('C25: a connection that is not Redis through ioredis', () => {
  const shapes: [string, Record<string, unknown>, RegExp][] = [
    [
      'a node-redis client',
      { connect() {}, disconnect() {}, duplicate() {}, sendCommand() {}, isOpen: false },
      /is a node-redis client/,
    ],
    ["Bun's Redis client", { connect() {}, disconnect() {}, duplicate() {}, send() {}, connected: false }, /Bun's/],
    ['another client', { connect() {}, disconnect() {}, duplicate() {} }, /not ioredis/],
  ];
  it.each(shapes)('%s is refused with UNSUPPORTED_CONNECTION before a Queue is made', (_, connection, message) => {
    const made = jest.spyOn(Queue.prototype, 'waitUntilReady');
    try {
      expect(() => createDispatchEngine(refusedOptions({ connection: connection as never }))).toThrow(
        expect.objectContaining({ code: 'UNSUPPORTED_CONNECTION', message: expect.stringMatching(message) }),
      );
      expect(() => createDispatchEngine(refusedOptions({ connection: connection as never }))).toThrow(
        UnsupportedConnectionError,
      );
      expect(made).not.toHaveBeenCalled();
    } finally {
      made.mockRestore();
    }
  });

  it('an ioredis Redis or Cluster client and ioredis options pass the check', () => {
    const redis = new IORedis({ ...redisOptions(), lazyConnect: true });
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    try {
      for (const connection of [redis, cluster, redisOptions(), { ...redisOptions(), maxRetriesPerRequest: null }])
        expect(() => checkConnection(connection)).not.toThrow();
    } finally {
      redis.disconnect();
      cluster.disconnect();
    }
  });

  const setDefault = (bullmq as Record<string, unknown>).setDefaultBackendFactory as
    ((factory?: unknown) => void) | undefined;
  // BullMQ 6 can make every Queue of the process a PostgreSQL (or other) one; BullMQ 5 has only Redis
  (setDefault ? it : it.skip)('a non-Redis BullMQ backend is refused with UNSUPPORTED_CONNECTION', async () => {
    class PostgresLikeBackend extends EventEmitter {
      qualifiedName = 'q';
      keys = {};
      toKey = (type: string) => type;
      waitUntilReady = async () => undefined;
      setQueueMeta = async () => undefined;
      close = async () => undefined;
      disconnect = async () => undefined;
    }
    const made: PostgresLikeBackend[] = [];
    setDefault!(() => {
      const b = new PostgresLikeBackend();
      made.push(b);
      return b;
    });
    const close = jest.spyOn(Queue.prototype, 'close');
    const opts = refusedOptions();
    try {
      expect(() => createDispatchEngine(opts)).toThrow(
        expect.objectContaining({
          code: 'UNSUPPORTED_CONNECTION',
          message: expect.stringMatching(/is a BullMQ PostgresLikeBackend backend; .* needs Redis through ioredis/),
        }),
      );
      expect(made).toHaveLength(1);
      expect(close).toHaveBeenCalledTimes(1);
      expect(await keysLeft(close, opts.prefix!)).toEqual([]);
    } finally {
      setDefault!();
      close.mockRestore();
      await closeClients();
    }
  });
});

describe('C25: the adapter on the installed bullmq', () => {
  it('redisClient is the queue’s ioredis client and promote runs a delayed job now', async () => {
    const h = harness();
    const c = await redisClient(h.engine.queue);
    expect(await (c as unknown as IORedis).ping()).toBe('PONG');
    expect(typeof (c as unknown as { defineCommand: unknown }).defineCommand).toBe('function');
    const job = await h.engine.queue.add('x', {}, { delay: 60_000 });
    expect(await job.getState()).toBe('delayed');
    await promote(h.engine.queue, job.id!);
    expect(await job.getState()).toBe('waiting');
    // BullMQ's own refusal, which clearDeferrals reads as "on its way already"
    await expect(promote(h.engine.queue, job.id!)).rejects.toThrow(/not in the delayed state/);
  });

  it('a deduplication key that outlived its job (an outage) does not block enqueue (BullMQ 5.81 and 6.0 kept it)', async () => {
    const h = harness();
    const first = await h.engine.enqueue(image, {});
    expect(first.added).toBe(true);
    const base = `${h.prefix}:${h.queueName}`;
    // the job's hash and its place in wait are lost, its deduplication key (no TTL) is not
    await h.redis.del(`${base}:${first.jobId}`);
    await h.redis.lrem(`${base}:wait`, 0, first.jobId!);
    expect(await h.redis.pttl(`${base}:de:${first.jobId!.split('@')[0]}`)).toBe(-1);
    const again = await h.engine.enqueue(image, {});
    expect(again).toMatchObject({ added: true, reason: null });
    expect(again.jobId).not.toBe(first.jobId);
    expect(await h.engine.queue.getJobState(again.jobId!)).toBe('waiting');
    // a live job still deduplicates: nothing dropped, nothing added
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: false, reason: 'pending', jobId: again.jobId });
    expect(await h.engine.queue.getWaitingCount()).toBe(1);
  });

  // also a client not connected yet (lazyConnect), as BullMQ users often pass one
  (onCluster ? it.skip : it).each([
    ['', {}],
    [' (lazyConnect, not connected yet)', { lazyConnect: true }],
  ])(
    `13.1: the app's own ioredis ${ioredisMajor} client%s as connection defers a stage and its wake-up dispatches it`,
    async (_, extra) => {
      const connection = new IORedis({ ...redisOptions(), ...extra });
      try {
        // the harness's 30 s window: the stage is still deferred when the test looks; wakeDeferred ends it
        const h = harness({ connection });
        h.executor.script(image, notSent('no_worker_available'), SENT);
        expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'no_worker_available' });
        expect(await h.engine.isStageDeferred(image)).toBe(true);
        expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
        h.engine.createWorker();
        await waitFor(() => h.executor.calls.length === 2, 'the wake-up to dispatch the stage');
        await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the deferral to end');
        await h.engine.close();
        // the engine never closes a client it was given
        expect(connection.status).toBe('ready');
      } finally {
        connection.disconnect();
      }
    },
  );
});
