import type { Cluster } from 'ioredis';
import {
  createDispatchEngine,
  InvalidOptionsError,
  type DispatchEngine,
  type ExecutorResult,
  type StageRef,
} from '../../src';
import { waitFor } from '../helpers/redis';
import { clusterKeysUnder, dropClusterPrefix, RedisClusterHarness } from './harness';
import { ScriptedExecutor } from '../helpers/engine';
import { describeWithRedisServer, NO_WORKER, SENT, taggedIsolated } from './support';

jest.setTimeout(60_000);

describeWithRedisServer('C21: through an ioredis Cluster (3 masters + 3 replicas)', () => {
  let harness: RedisClusterHarness;
  let cluster: Cluster;
  const engines: DispatchEngine[] = [];
  const prefixes: string[] = [];

  beforeAll(async () => {
    harness = await RedisClusterHarness.start({ masters: 3, replicasPerMaster: 1 });
    cluster = harness.connect({ redisOptions: { maxRetriesPerRequest: null } });
  }, 90_000);

  afterEach(async () => {
    await Promise.all(engines.splice(0).map((e) => e.close()));
    await Promise.all(prefixes.splice(0).map((p) => dropClusterPrefix(cluster, p)));
  });

  afterAll(async () => {
    await harness?.stop();
  }, 30_000);

  // by hand, not harness(): the engines run on this file's private cluster, not on the tests' Redis
  function engine(plan: (ref: StageRef) => ExecutorResult<string>[], capacitySeconds = 0.6, names = taggedIsolated()) {
    const exec = new ScriptedExecutor(SENT, plan);
    const e = createDispatchEngine<unknown, string>({
      connection: cluster,
      ...names,
      executor: exec.fn,
      windows: { capacitySeconds, jitter: 0 },
    });
    engines.push(e);
    prefixes.push(names.prefix);
    return { engine: e, calls: exec.calls, callsOf: (r: StageRef) => exec.callsOf(r), ...names };
  }

  const ref = (scope: string[], stage = 'image'): StageRef => ({ scope, stage });

  describe('a capacity outcome', () => {
    it('defers the stage, and its delayed wake-up re-dispatches it through a Worker', async () => {
      // a window long enough to look at the deferral on a busy machine before it ends
      const { engine: e, callsOf } = engine(() => [NO_WORKER], 3);
      const stage = ref(['book-1', 'ch-1']);
      e.createWorker({ concurrency: 2 });
      expect((await e.enqueue(stage, { n: 1 })).added).toBe(true);
      await waitFor(async () => (await e.listDeferred()).length === 1, 'the deferral');
      const [deferred] = await e.listDeferred();
      expect(deferred!.ref).toEqual(stage);
      expect(deferred!.reason).toBe('no_worker_available');
      expect(await e.isStageDeferred(stage)).toBe(true);

      await waitFor(() => callsOf(stage).length === 2, 'the wake-up to re-dispatch', 15_000);
      const [first, second] = callsOf(stage);
      expect(first!.result).toBe(NO_WORKER);
      expect(second!.result).toBe(SENT);
      // the wake-up runs when the window has ended, not before
      expect(second!.at).toBeGreaterThanOrEqual(deferred!.until - 25);
      await waitFor(async () => (await e.listDeferred()).length === 0, 'the deferral to end');
      expect(await e.isStageDeferred(stage)).toBe(false);
    });
  });

  describe('while a stage is deferred', () => {
    it('suppresses dispatchStage without calling the executor', async () => {
      const { engine: e, callsOf } = engine(() => [NO_WORKER], 30);
      const stage = ref(['book-2', 'ch-1', 'sc-3'], 'video');
      const first = await e.dispatchStage(stage, {});
      expect(first.dispatched).toBe(false);
      expect(first.until).toBeGreaterThan(Date.now());
      for (let i = 0; i < 5; i++) {
        const again = await e.dispatchStage(stage, {});
        expect(again).toMatchObject({ dispatched: false, deferred: true, reason: 'deferred_capacity' });
      }
      expect(callsOf(stage)).toHaveLength(1);
      expect((await e.enqueue(stage, {})).reason).toBe('deferred');
    });

    it('cancel ends the deferral and removes its wake-up', async () => {
      const { engine: e, callsOf } = engine(() => [NO_WORKER], 30);
      const stage = ref(['book-3']);
      await e.dispatchStage(stage, {});
      expect(await e.isStageDeferred(stage)).toBe(true);
      const cancelled = await e.cancelActiveDispatch(stage, 'user');
      expect(cancelled).toMatchObject({ hadDeferral: true, inFlight: false, removedJobs: 1, reason: 'user' });
      expect(await e.isStageDeferred(stage)).toBe(false);
      expect(await e.listDeferred()).toEqual([]);
      expect(await e.queue.getDelayedCount()).toBe(0);
      const next = await e.dispatchStage(stage, {});
      expect(next.dispatched).toBe(true);
      expect(callsOf(stage)).toHaveLength(2);
    });

    it('clearDeferrals ends the deferrals of one scope, which are dispatched once, now', async () => {
      const { engine: e, callsOf } = engine(() => [NO_WORKER], 60);
      const inBook1 = [ref(['book-1', 'ch-1']), ref(['book-1', 'ch-2']), ref(['book-1', 'ch-2'], 'video')];
      const inBook10 = ref(['book-10', 'ch-1']);
      for (const s of [...inBook1, inBook10]) expect((await e.dispatchStage(s, {})).dispatched).toBe(false);
      expect((await e.listDeferred(['book-1'])).map((d) => d.ref)).toHaveLength(3);
      expect((await e.listDeferred(['book-10'])).map((d) => d.ref)).toEqual([inBook10]);

      e.createWorker({ concurrency: 4 });
      expect(await e.clearDeferrals(['book-1'])).toBe(3);
      await waitFor(() => inBook1.every((s) => callsOf(s).length === 2), 'the cleared stages to be dispatched', 15_000);
      for (const s of inBook1) expect(callsOf(s).map((c) => c.result)).toEqual([NO_WORKER, SENT]);
      expect(await e.isStageDeferred(inBook10)).toBe(true);
      expect((await e.listDeferred()).map((d) => d.ref)).toEqual([inBook10]);
      expect(callsOf(inBook10)).toHaveLength(1);
    });
  });

  describe('keys', () => {
    it('every key of a queue is in the slot of its hash tag, on one master', async () => {
      const {
        engine: e,
        prefix,
        queueName,
      } = engine((r) => (r.stage === 'a' ? [NO_WORKER, NO_WORKER] : [NO_WORKER]), 30);
      const stages = ['a', 'b', 'c'].map((s) => ref(['book', s], s));
      for (const s of stages) await e.dispatchStage(s, {});
      await e.enqueue(ref(['book', 'd']), {});
      await e.cancelActiveDispatch(stages[1]!);
      await e.clearDeferrals(['book']);
      await e.dispatchStage(ref(['book', 'a'], 'a'), {});
      const keys = await clusterKeysUnder(cluster, prefix);
      const kinds = new Set(keys.map(({ key }) => key.slice(`${prefix}:${queueName}:`.length).split(':')[0]));
      expect([...kinds]).toEqual(expect.arrayContaining(['sd', 'de', 'delayed', 'id', 'events', 'meta']));
      const tag = prefix.slice(1, -1);
      const slot = await cluster.call('CLUSTER', 'KEYSLOT', tag);
      for (const { key } of keys)
        expect({ key, slot: await cluster.call('CLUSTER', 'KEYSLOT', key) }).toEqual({ key, slot });
      const owner = await harness.ownerOf(`{${tag}}`);
      expect(new Set(keys.map((k) => k.port))).toEqual(new Set([owner]));
    });

    it('a prefix without hash tag is refused before anything is written', async () => {
      const names = { prefix: `untagged-${Date.now()}`, queueName: 'q' };
      expect(() =>
        createDispatchEngine<unknown, string>({ connection: cluster, ...names, executor: async () => SENT }),
      ).toThrow(InvalidOptionsError);
      expect(await clusterKeysUnder(cluster, names.prefix)).toEqual([]);
    });
  });

  describe('several queues with different hash tags', () => {
    it('spread over the masters, each with its own deferrals, list and clear', async () => {
      const masters = await harness.masters();
      // one hash tag per master
      const tags = new Map<number, string>();
      for (let i = 0; tags.size < masters.length && i < 10_000; i++) {
        const tag = `render-${i}-${Date.now().toString(36)}`;
        const owner = await harness.ownerOf(`{${tag}}`);
        if (!tags.has(owner)) tags.set(owner, tag);
      }
      expect([...tags.keys()].sort()).toEqual(masters);

      const queues = [...tags.entries()].map(([port, tag]) => ({
        port,
        ...engine(() => [NO_WORKER], 60, { prefix: `{${tag}}`, queueName: 'dispatch' }),
      }));
      // each queue defers its own stages, under the same scope names
      for (const [i, q] of queues.entries()) {
        for (let s = 0; s <= i; s++) await q.engine.dispatchStage(ref(['book-1', `ch-${s}`]), {});
      }
      for (const [i, q] of queues.entries()) {
        expect(await q.engine.listDeferred(['book-1'])).toHaveLength(i + 1);
        const keys = await clusterKeysUnder(cluster, q.prefix);
        expect(keys.length).toBeGreaterThan(0);
        expect(new Set(keys.map((k) => k.port))).toEqual(new Set([q.port]));
      }

      // clear on one queue leaves the others deferred
      const [first, ...rest] = queues;
      first!.engine.createWorker();
      expect(await first!.engine.clearDeferrals(['book-1'])).toBe(1);
      await waitFor(() => first!.callsOf(ref(['book-1', 'ch-0'])).length === 2, 'the cleared stage to run');
      expect(await first!.engine.listDeferred()).toEqual([]);
      for (const [i, q] of rest.entries()) {
        expect(await q.engine.listDeferred(['book-1'])).toHaveLength(i + 2);
        expect(await q.engine.isStageDeferred(ref(['book-1', 'ch-0']))).toBe(true);
        expect(q.calls.length).toBe(i + 2);
      }
    });
  });
});
