import { Queue } from 'bullmq';
import type { Cluster } from 'ioredis';
import {
  createDispatchEngine,
  InvalidOptionsError,
  ReplicationUnconfirmedError,
  type DispatchEngine,
  type EngineEvents,
} from '../../src';
import { DeferralStore } from '../../src/deferral-store';
import { waitFor } from '../helpers/redis';
import { dropClusterPrefix, parseInfo, RedisClusterHarness } from './harness';
import { describeWithRedisServer, NO_WORKER, taggedIsolated } from './support';

jest.setTimeout(60_000);

/** How many WAIT commands a node has run, from `INFO commandstats`. */
async function waitCalls(harness: RedisClusterHarness, port: number): Promise<number> {
  const info = await harness.node(port).info('commandstats');
  return Number(/cmdstat_wait:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

async function blockedClients(harness: RedisClusterHarness, port: number): Promise<number> {
  const info = await harness.node(port).info('clients');
  return Number(parseInfo(info).blocked_clients ?? 0);
}

describeWithRedisServer('C21: waitForReplicas on a Redis Cluster', () => {
  let harness: RedisClusterHarness;
  let cluster: Cluster;
  const prefixes: string[] = [];
  const engines: DispatchEngine[] = [];
  let paused: number | undefined;

  beforeAll(async () => {
    harness = await RedisClusterHarness.start({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 5000 });
    cluster = harness.connect();
  }, 90_000);

  afterEach(async () => {
    if (paused !== undefined) harness.resume(paused);
    paused = undefined;
    await Promise.all(engines.splice(0).map((e) => e.close()));
  });

  afterAll(async () => {
    if (cluster) await Promise.all(prefixes.map((p) => dropClusterPrefix(cluster, p).catch(() => undefined)));
    await harness?.stop();
  }, 30_000);

  /** An engine on its own tagged prefix, whose every dispatch is a capacity deferral, with its master and replica. */
  async function setup(waitForReplicas?: false | { replicas?: number; timeoutMs?: number }) {
    const names = taggedIsolated();
    prefixes.push(names.prefix);
    // by hand, not harness(): the engine runs on this file's private cluster, not on the tests' Redis
    const engine = createDispatchEngine<unknown, string>({
      connection: cluster,
      ...names,
      executor: async () => NO_WORKER,
      ...(waitForReplicas === undefined ? {} : { waitForReplicas }),
    });
    engines.push(engine);
    // the start-up permission check sends its own WAIT 0 0: done before a test counts WAITs
    await engine.waitUntilReady();
    const lags: EngineEvents['replicaLag'][] = [];
    engine.on('replicaLag', (e) => lags.push(e));
    const master = await harness.ownerOf(names.prefix);
    const replica = await harness.replicaOf(master);
    return { engine, lags, master, replica };
  }

  const ref = (n: number) => ({ scope: ['book', `ch-${n}`], stage: 'image' });

  it('with no replica in sync a deferral goes on after timeoutMs, emits replicaLag, and stops waiting for 10 x timeoutMs', async () => {
    const { engine, lags, master, replica } = await setup({ replicas: 1, timeoutMs: 1000 });
    harness.pause(replica);
    paused = replica;
    const first = await engine.dispatchStage(ref(1), {});
    expect(first.reason).toBe('no_worker_available');
    expect(lags).toEqual([{ op: 'defer', writes: 1, acked: 0, wanted: 1, skipMs: 10_000 }]);
    expect(await harness.node(master).exists(engine.deferredStageKey(ref(1)))).toBe(1);

    // within the skip window the next deferral sends no WAIT and reports nothing
    const before = await waitCalls(harness, master);
    await engine.dispatchStage(ref(2), {});
    expect(await waitCalls(harness, master)).toBe(before);
    expect(lags).toHaveLength(1);
    expect(await engine.isStageDeferred(ref(2))).toBe(true);
  });

  it('a WAIT whose connection is killed does not confirm the write: the call rejects, the write stands', async () => {
    const { engine, master, replica } = await setup({ timeoutMs: 3000 });
    harness.pause(replica);
    paused = replica;
    const outcome = engine.dispatchStage(ref(1), {}).then(
      () => 'returned',
      (error: unknown) => error,
    );
    await waitFor(async () => (await blockedClients(harness, master)) >= 1, 'a client blocked in WAIT');
    const list = (await harness.node(master).call('CLIENT', 'LIST')) as string;
    const waiting = /^id=(\d+) .*cmd=wait\b/m.exec(list);
    expect(waiting).not.toBeNull();
    await harness.node(master).call('CLIENT', 'KILL', 'ID', waiting![1]!);
    harness.resume(replica);
    paused = undefined;
    // ioredis fails the pipeline (AbortError), or resends it on a new connection, whose WAIT says
    // nothing about the write (ReplicationUnconfirmedError): either way the call must not return
    const error = await outcome;
    expect(error).toBeInstanceOf(Error);
    expect(await engine.isStageDeferred(ref(1))).toBe(true); // the write stands on the master
  });

  it('a WAIT that ran on another connection than the write rejects with ReplicationUnconfirmedError', async () => {
    const { engine } = await setup();
    const lags: unknown[] = [];
    const store = new DeferralStore(engine.queue, { replicas: 1, timeoutMs: 1000, onLag: (e) => lags.push(e) });
    const { connection: here } = await store.probe('book/ch-9/image');
    expect(here).toMatch(/^\d+ 127\.0\.0\.1:\d+ 127\.0\.0\.1:\d+$/);
    await expect(store.replicated('defer', here)).resolves.toBeUndefined();
    const elsewhere = here!.replace(/^\d+/, (id) => String(Number(id) + 1));
    await expect(store.replicated('defer', elsewhere)).rejects.toBeInstanceOf(ReplicationUnconfirmedError);
    expect(lags).toEqual([]);
  });

  it('writes acknowledged in one turn share one WAIT; a write whose connection was not read sends none', async () => {
    const { engine, master } = await setup();
    const store = new DeferralStore(engine.queue, { replicas: 1, timeoutMs: 60_000, onLag: () => undefined });
    const { connection: here } = await store.probe('book/ch-8/image');
    const before = await waitCalls(harness, master);
    await Promise.all([store.replicated('defer', here), store.replicated('cancel', here)]);
    expect(await waitCalls(harness, master)).toBe(before + 1);
    // a write made while no connection was read (e.g. its probe ran in the skip window) is not awaited
    await expect(store.replicated('defer', undefined)).resolves.toBeUndefined();
    expect(await waitCalls(harness, master)).toBe(before + 1);
  });

  it('a WAIT that cannot be sent confirms nothing: the call rejects with ReplicationUnconfirmedError, the failure its cause', async () => {
    const { engine } = await setup();
    const own = harness.connect();
    const queue = new Queue(engine.queue.name, { connection: own, prefix: engine.queue.opts.prefix });
    try {
      const store = new DeferralStore(queue, { replicas: 1, timeoutMs: 1000, onLag: () => undefined });
      const { connection: here } = await store.probe('book/ch-7/image');
      own.disconnect();
      const error = await store.replicated('defer', here).then(
        () => 'confirmed',
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ReplicationUnconfirmedError);
      expect((error as ReplicationUnconfirmedError).cause).toBeInstanceOf(Error);
    } finally {
      await queue.close();
    }
  });

  it('on by default on a Cluster: deferral, cancel, clear and an added job each send one WAIT to the master; `false` sends none', async () => {
    // on by default: an engine given no option waits for a replica. Its first write always sends
    // a WAIT (no shortfall came before it), whether or not the replica answers within the
    // default 250 ms
    const byDefault = await setup();
    const first = await waitCalls(harness, byDefault.master);
    await byDefault.engine.dispatchStage(ref(1), {});
    expect(await waitCalls(harness, byDefault.master)).toBe(first + 1);

    // one WAIT per write: counted with a timeoutMs no loaded machine reaches. With the default
    // 250 ms a replica slow to ack (not scheduled for a quarter of a second) is a shortfall,
    // `replicaLag`, and the next writes within 10 x timeoutMs send no WAIT: the count comes out
    // short. A WAIT returns as soon as the replica acks, so the long timeout costs nothing
    const on = await setup({ timeoutMs: 60_000 });
    const before = await waitCalls(harness, on.master);
    const sent = async () => ({ waits: (await waitCalls(harness, on.master)) - before, lags: on.lags });
    await on.engine.dispatchStage(ref(1), {});
    await on.engine.dispatchStage(ref(2), {});
    expect(await sent()).toEqual({ waits: 2, lags: [] });
    await on.engine.cancelActiveDispatch(ref(1));
    expect(await sent()).toEqual({ waits: 3, lags: [] });
    expect(await on.engine.clearDeferrals(['book'])).toBe(1);
    expect(await sent()).toEqual({ waits: 4, lags: [] });
    // a job enqueue adds is awaited; a refused enqueue (the stage has a job) writes nothing and waits for nothing
    expect(await on.engine.enqueue(ref(3), {})).toMatchObject({ added: true });
    expect(await sent()).toEqual({ waits: 5, lags: [] });
    expect(await on.engine.enqueue(ref(3), {})).toMatchObject({ added: false, reason: 'pending' });
    expect(await sent()).toEqual({ waits: 5, lags: [] });

    const off = await setup(false);
    const offBefore = await waitCalls(harness, off.master);
    await off.engine.dispatchStage(ref(1), {});
    await off.engine.cancelActiveDispatch(ref(1));
    expect(await off.engine.isStageDeferred(ref(1))).toBe(false);
    expect(await waitCalls(harness, off.master)).toBe(offBefore);
  });

  it('waitForReplicas is validated: replicas and timeoutMs are positive integers', () => {
    const base = { connection: cluster, ...taggedIsolated(), executor: async () => NO_WORKER };
    expect(() => createDispatchEngine<unknown, string>({ ...base, waitForReplicas: { replicas: 0 } })).toThrow(
      InvalidOptionsError,
    );
    expect(() => createDispatchEngine<unknown, string>({ ...base, waitForReplicas: { timeoutMs: 0 } })).toThrow(
      /waitForReplicas\.timeoutMs/,
    );
    expect(() => createDispatchEngine<unknown, string>({ ...base, waitForReplicas: true as never })).toThrow(
      InvalidOptionsError,
    );
  });
  // last: it kills a master, so the cluster has one master without a replica afterwards
  it('a deferral returns only once the replica holds it, and survives its master killed with SIGKILL right after', async () => {
    const { engine, lags, master, replica } = await setup({ timeoutMs: 20_000 });
    harness.pause(replica);
    paused = replica;
    let settled = false;
    const attempt = engine.dispatchStage(ref(1), {}).finally(() => {
      settled = true;
    });
    // the deferral is written on the master, and the engine's connection is blocked in WAIT
    const markerKey = engine.deferredStageKey(ref(1));
    await waitFor(async () => (await harness.node(master).exists(markerKey)) === 1, 'the marker on the master');
    await waitFor(async () => (await blockedClients(harness, master)) >= 1, 'a client blocked in WAIT');
    expect(settled).toBe(false);

    harness.resume(replica);
    paused = undefined;
    const result = await attempt;
    expect(result).toMatchObject({ dispatched: false, reason: 'no_worker_available', retryable: true });
    expect(lags).toEqual([]);
    const onReplica = harness.node(replica);
    await onReplica.call('READONLY');
    expect(await onReplica.exists(markerKey)).toBe(1);

    // the master dies at once; the replica takes over with the deferral
    await harness.kill(master, 'SIGKILL');
    await harness.waitFailover(master, 30_000);
    expect(await harness.ownerOf(markerKey)).toBe(replica);
    await waitFor(() => engine.isStageDeferred(ref(1)).catch(() => false), 'the deferral on the promoted replica');
    const listed = await engine.listDeferred(['book']);
    expect(listed.map((d) => d.ref)).toEqual([ref(1)]);
  });
});
