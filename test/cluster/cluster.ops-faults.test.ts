import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Cluster, ClusterOptions } from 'ioredis';
import {
  createDispatchEngine,
  ReplicationUnconfirmedError,
  stageId,
  type DispatchEngine,
  type StageRef,
} from '../../src';
import { DeferralStore } from '../../src/deferral-store';
import { StoreKeys } from '../../src/store/keys';
import { withRedirects } from '../../src/store/redirects';
import { dropClusterPrefix, RedisClusterHarness } from './harness';
import { describeWithRedisServer, NO_WORKER, taggedIsolated } from './support';

jest.setTimeout(60_000);

/**
 * 's cluster items (15.1, 15.2, 15.12): a failover, a completed slot move (reshard) and a
 * slot held MIGRATING, against a private 3 + 3 cluster, with the client settings docs/scaling.md
 * recommends (`retryDelayOnTryAgain` left at ioredis' 100 ms).
 */
const RECOMMENDED: ClusterOptions = {
  redisOptions: { maxRetriesPerRequest: null },
  retryDelayOnClusterDown: 300,
  retryDelayOnFailover: 300,
  retryDelayOnTryAgain: 100,
  maxRedirections: 64,
};
/** How long ioredis retries one command that keeps answering TRYAGAIN: maxRedirections x retryDelayOnTryAgain. */
const IOREDIS_TRYAGAIN_MS = 64 * 100;
/** "Fails fast": the client's own TRYAGAIN budget, plus the engine's 2 s for its pipelines, plus slack. */
const FAIL_FAST_MS = IOREDIS_TRYAGAIN_MS + 3000;
/** clearDeferrals: its read of the scope's licences, its batch call and its promotions (together), a client budget each. */
const CLEAR_FAIL_FAST_MS = 3 * IOREDIS_TRYAGAIN_MS + 3000;

type Timed<T> = { ok: true; value: T; ms: number } | { ok: false; error: Error; ms: number };

async function timed<T>(run: () => Promise<T>): Promise<Timed<T>> {
  const started = Date.now();
  try {
    const value = await run();
    return { ok: true, value, ms: Date.now() - started };
  } catch (error) {
    return { ok: false, error: error as Error, ms: Date.now() - started };
  }
}

const describeOutcome = (t: Timed<unknown>) =>
  t.ok ? `ok in ${t.ms} ms` : `${t.error.constructor.name} in ${t.ms} ms: ${t.error.message.slice(0, 120)}`;

describeWithRedisServer('C21: cluster operations under faults (failover, reshard, slot migration)', () => {
  let harness: RedisClusterHarness;
  let cluster: Cluster;
  const prefixes: string[] = [];
  const engines: DispatchEngine[] = [];
  /** Migrations a test left open (it failed half-way): reverted after it. */
  const open: { slot: number; from: number; to: number }[] = [];
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    harness = await RedisClusterHarness.start({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1500 });
    cluster = harness.connect(RECOMMENDED);
  }, 90_000);

  afterEach(async () => {
    jest.useRealTimers(); // a test that froze Date.now()
    for (const m of open.splice(0)) await harness.revertMigration(m.slot, m.from, m.to).catch(() => undefined);
    await Promise.all(engines.splice(0).map((e) => e.close()));
  });

  afterAll(async () => {
    if (cluster) await Promise.all(prefixes.map((p) => dropClusterPrefix(cluster, p).catch(() => undefined)));
    await harness?.stop();
    const dir = resolve(__dirname, '../artifacts');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'cluster-ops-faults.json'), `${JSON.stringify(figures, null, 2)}\n`);
  }, 30_000);

  /** A queue (tagged prefix) whose slot is served by master `port`, and not by a slot in `not`. */
  async function queueOn(port: number, not: number[] = []) {
    for (let i = 0; i < 10_000; i++) {
      const names = taggedIsolated();
      const slot = await harness.slotOf(names.prefix);
      if (!not.includes(slot) && (await harness.ownerOf(names.prefix)) === port) {
        prefixes.push(names.prefix);
        return { ...names, slot, keys: new StoreKeys(names.prefix, names.queueName) };
      }
    }
    throw new Error(`no tag found on master ${port}`);
  }

  /** An engine with the Cluster defaults (waitForReplicas on) whose every dispatch defers for 10 minutes. */
  async function engineOn(names: { prefix: string; queueName: string }): Promise<DispatchEngine> {
    // by hand, not harness(): the engine runs on this file's private cluster, not on the tests' Redis
    const engine = createDispatchEngine<unknown, string>({
      connection: cluster,
      prefix: names.prefix,
      queueName: names.queueName,
      executor: async () => NO_WORKER,
      windows: { capacitySeconds: 600 },
    });
    engines.push(engine);
    await engine.waitUntilReady();
    return engine;
  }

  async function migrating(slot: number, from: number, to: number) {
    await harness.beginMigration(slot, from, to);
    open.push({ slot, from, to });
  }
  function ended(slot: number): void {
    open.splice(
      open.findIndex((m) => m.slot === slot),
      1,
    );
  }

  /** Defers `refs` (one capacity answer each) and returns each stage with its wake-up's id. */
  async function deferAll(engine: DispatchEngine, refs: StageRef[]) {
    const out: { ref: StageRef; wakeUp: string }[] = [];
    for (const ref of refs) {
      const r = await engine.dispatchStage(ref, {});
      expect(r).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
      const listed = (await engine.listDeferred(ref.scope)).find((d) => stageId(d.ref) === stageId(ref));
      out.push({ ref, wakeUp: listed!.wakeUpJobId });
    }
    return out;
  }

  /**
   * Each stage is 'deferred' (marker, and its wake-up delayed), 'woken' (no marker, its wake-up
   * waiting to run: no Worker here) or 'ended' (no marker, its wake-up delayed: a clear ended the
   * deferral and its promotion was refused, so it runs at its time); anything else is reported as it is.
   */
  async function states(engine: DispatchEngine, stages: { ref: StageRef; wakeUp: string }[]) {
    return Promise.all(
      stages.map(async (s) => {
        const deferred = await engine.isStageDeferred(s.ref);
        const job = await engine.queue.getJobState(s.wakeUp);
        if (deferred && job === 'delayed') return 'deferred';
        if (!deferred && ['waiting', 'active', 'completed'].includes(job)) return 'woken';
        if (!deferred && job === 'delayed') return 'ended';
        return `neither: marker ${deferred}, wake-up ${job}`;
      }),
    );
  }

  const count = (xs: string[], x: string) => xs.filter((y) => y === x).length;

  it('after a completed slot move (reshard to another master), 8 of 8 enqueues of new stages succeed (waitForReplicas on)', async () => {
    const [source, target] = await harness.masters();
    const q = await queueOn(source!);
    const engine = await engineOn(q);
    // the client's slot map and script caches know the source
    for (let i = 0; i < 3; i++)
      expect(await engine.enqueue({ scope: ['warm', `${i}`], stage: 'image' }, {})).toMatchObject({ added: true });

    await migrating(q.slot, source!, target!);
    await harness.completeMigration(q.slot, source!, target!);
    ended(q.slot);
    expect(await harness.ownerOf(q.prefix)).toBe(target);

    const results = [];
    for (let i = 0; i < 8; i++)
      results.push(await timed(() => engine.enqueue({ scope: ['after', `${i}`], stage: 'image' }, {})));
    figures.reshard = { enqueues: results.map(describeOutcome) };
    expect(results.map((r) => (r.ok ? r.value.added : describeOutcome(r)))).toEqual(Array(8).fill(true));
    expect(await engine.queue.getJobCounts('waiting')).toEqual({ waiting: 11 });
    expect(await harness.keysInSlot(q.slot, source!)).toBe(0);
  });

  it('with the slot MIGRATING, clearDeferrals wakes every stage it ended or leaves it deferred; after a revert (STABLE) or a completed move, clearing again wakes the rest', async () => {
    const [source, target] = await harness.masters();
    const a = await queueOn(source!);
    const b = await queueOn(source!, [a.slot]);
    const refs = Array.from({ length: 12 }, (_, i) => ({ scope: ['book', `ch-${i}`], stage: 'image' }));
    const queues = await Promise.all(
      [a, b].map(async (q) => {
        const engine = await engineOn(q);
        return { q, engine, stages: await deferAll(engine, refs) };
      }),
    );

    for (const { q } of queues) await migrating(q.slot, source!, target!);
    const first = await Promise.all(queues.map(({ engine }) => timed(() => engine.clearDeferrals(['book']))));
    for (const r of first) if (!r.ok) expect(r.ms).toBeLessThan(CLEAR_FAIL_FAST_MS);
    // still migrating: a stage the clear did not end is still deferred (read with ASK through the
    // migration); a clear that answered counted exactly those it ended
    const cleared: number[] = [];
    for (const [i, { engine }] of queues.entries()) {
      const deferred = await Promise.all(refs.map((ref) => engine.isStageDeferred(ref)));
      cleared.push(12 - deferred.filter(Boolean).length);
      const r = first[i]!;
      if (r.ok) expect(r.value).toBe(cleared[i]);
    }

    // queue a's move is reverted, queue b's completed
    await harness.revertMigration(a.slot, source!, target!);
    ended(a.slot);
    await harness.completeMigration(b.slot, source!, target!);
    ended(b.slot);
    expect(await harness.ownerOf(a.prefix)).toBe(source);
    expect(await harness.ownerOf(b.prefix)).toBe(target);

    const again = [];
    for (const [i, { engine, stages }] of queues.entries()) {
      // each stage deferred, or ended whole (woken, or its promotion refused: it runs at its time)
      const before = await states(engine, stages);
      expect(before.filter((s) => !['deferred', 'woken', 'ended'].includes(s))).toEqual([]);
      expect(count(before, 'deferred')).toBe(12 - cleared[i]!);
      const second = await timed(() => engine.clearDeferrals(['book']));
      again.push(second);
      expect(second.ok ? second.value : describeOutcome(second)).toBe(12 - cleared[i]!);
      expect((await states(engine, stages)).filter((s) => s !== 'woken' && s !== 'ended')).toEqual([]);
    }
    figures.clearWhileMigrating = {
      firstClear: first.map(describeOutcome),
      clearedWhileMigrating: cleared,
      clearAfter: { reverted: describeOutcome(again[0]!), completed: describeOutcome(again[1]!) },
    };
  });

  it('during a slot migration dispatchStage, enqueue, cancel and clear succeed or fail fast, leave nothing half-written, and all work once the move completes', async () => {
    const [source, target] = await harness.masters();
    const q = await queueOn(source!);
    const engine = await engineOn(q);
    const ref = (scope: string) => ({ scope: [scope, 's'], stage: 'image' });
    const [toCancel, toClear] = await deferAll(engine, [ref('cancel'), ref('clear')]);
    expect(await engine.enqueue(ref('other'), {})).toMatchObject({ added: true });

    // mid-move: the slot MIGRATING and about half of the queue's keys already on the target
    await migrating(q.slot, source!, target!);
    const total = await harness.keysInSlot(q.slot, source!);
    const moved = await harness.migrateKeys(q.slot, source!, target!, Math.floor(total / 2));
    expect(moved).toBeGreaterThan(0);
    expect(await harness.keysInSlot(q.slot, source!)).toBeGreaterThan(0);

    const [dispatch, enqueue, cancel, clear] = await Promise.all([
      timed(() => engine.dispatchStage(ref('dispatch'), {})),
      timed(() => engine.enqueue(ref('enqueue'), {})),
      timed(() => engine.cancelActiveDispatch(toCancel!.ref)),
      timed(() => engine.clearDeferrals(['clear'])),
    ]);
    figures.duringMigration = {
      keysInSlot: total,
      movedBefore: moved,
      dispatchStage: describeOutcome(dispatch),
      enqueue: describeOutcome(enqueue),
      cancel: describeOutcome(cancel),
      clear: describeOutcome(clear),
    };
    for (const r of [dispatch, enqueue, cancel]) if (!r.ok) expect(r.ms).toBeLessThan(FAIL_FAST_MS);
    if (!clear.ok) expect(clear.ms).toBeLessThan(CLEAR_FAIL_FAST_MS);

    await harness.completeMigration(q.slot, source!, target!);
    ended(q.slot);
    expect(await harness.ownerOf(q.prefix)).toBe(target);

    // nothing half-written: each operation either happened whole or left its stage as it was
    const lockOf = (r: StageRef) => q.keys.lock(stageId(r));
    if (dispatch.ok) {
      expect(dispatch.value).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
      expect(await engine.listDeferred(['dispatch'])).toHaveLength(1);
    } else {
      expect(await engine.isStageDeferred(ref('dispatch'))).toBe(false);
      expect(await engine.listDeferred(['dispatch'])).toEqual([]);
    }
    expect(await cluster.exists(lockOf(ref('dispatch')))).toBe(0);
    // an enqueue that failed left no job and no deduplication key: the next one adds
    const enqueueAgain = await engine.enqueue(ref('enqueue'), {});
    expect(enqueueAgain).toMatchObject(enqueue.ok ? { added: false, reason: 'pending' } : { added: true });
    expect(await engine.queue.getJobCounts('waiting')).toEqual({ waiting: 2 });
    if (cancel.ok) {
      expect(cancel.value).toMatchObject({ hadDeferral: true, removedJobs: 1 });
      expect(await engine.queue.getJobState(toCancel!.wakeUp)).toBe('unknown');
      expect(await engine.isStageDeferred(toCancel!.ref)).toBe(false);
    } else {
      expect(await states(engine, [toCancel!])).toEqual(['deferred']);
    }
    // the clear ended the deferral whole (counted when it answered; its promotion may have been
    // refused: its wake-up runs at its time) or left it deferred
    const [clearState] = await states(engine, [toClear!]);
    expect(['deferred', 'woken', 'ended']).toContain(clearState);
    if (clear.ok) expect(clear.value).toBe(clearState === 'deferred' ? 0 : 1);

    // after the move every operation works
    expect(await engine.dispatchStage(ref('after'), {})).toMatchObject({ reason: 'no_worker_available' });
    expect(await engine.isStageDeferred(ref('after'))).toBe(true);
    expect(await engine.enqueue(ref('after-enqueue'), {})).toMatchObject({ added: true });
    expect(await engine.cancelActiveDispatch(toCancel!.ref)).toMatchObject({ hadDeferral: !cancel.ok });
    expect(await engine.cancelActiveDispatch(ref('after'))).toMatchObject({ hadDeferral: true, removedJobs: 1 });
    expect(await engine.clearDeferrals(['clear'])).toBe(clearState === 'deferred' ? 1 : 0);
    expect(await states(engine, [toClear!])).not.toEqual(['deferred']);
  });

  it('a write confirmed during a migration: the WAIT ran on the write connection confirms it, one on another connection is ReplicationUnconfirmedError', async () => {
    const [source, target] = await harness.masters();
    const q = await queueOn(source!);
    const engine = await engineOn(q);
    const store = new DeferralStore(engine.queue, { replicas: 1, timeoutMs: 1000, onLag: () => undefined });
    const { connection: here } = await store.probe('book/ch-1/image');
    expect(here).toMatch(/^\d+ 127\.0\.0\.1:\d+ 127\.0\.0\.1:\d+$/);

    // the WAIT pipeline's route key never exists, so on a MIGRATING slot its PERSIST answers ASK
    await migrating(q.slot, source!, target!);
    await expect(store.replicated('defer', here)).resolves.toBeUndefined();
    const elsewhere = here!.replace(/^\d+/, (id) => String(Number(id) + 1));
    await expect(store.replicated('cancel', elsewhere)).rejects.toBeInstanceOf(ReplicationUnconfirmedError);
    await harness.revertMigration(q.slot, source!, target!);
    ended(q.slot);
  });

  it('a transaction refused during a migration leaves its connection working: after the revert, cancel, a new deferral and clear all work', async () => {
    const [source, target] = await harness.masters();
    const q = await queueOn(source!);
    const engine = await engineOn(q);
    const [a, b] = await deferAll(engine, [
      { scope: ['book', 'a'], stage: 'image' },
      { scope: ['book', 'b'], stage: 'image' },
    ]);
    // the source holds no script, as a node that never ran them, whatever earlier tests ran there;
    // ioredis still believes this connection loaded every script it sent on it
    await harness.node(source!).call('SCRIPT', 'FLUSH');
    await migrating(q.slot, source!, target!);
    const refused = await timed(() => engine.cancelActiveDispatch(a!.ref));
    figures.refusedCancel = describeOutcome(refused);
    expect(refused).toMatchObject({ ok: false });
    expect(refused.ms).toBeLessThan(FAIL_FAST_MS);
    await harness.revertMigration(q.slot, source!, target!);
    ended(q.slot);

    expect(await engine.cancelActiveDispatch(a!.ref)).toMatchObject({ hadDeferral: true, removedJobs: 1 });
    const next = { scope: ['book', 'c'], stage: 'image' };
    expect(await engine.dispatchStage(next, {})).toMatchObject({ reason: 'no_worker_available' });
    expect(await engine.isStageDeferred(next)).toBe(true);
    expect(await engine.clearDeferrals(['book'])).toBe(2);
    expect(await states(engine, [b!])).toEqual(['woken']);
  });

  /**
   * The engine's pipelines and MULTIs on a Cluster (`withRedirects`): a probe-like pipeline
   * (`CLIENT INFO`, which ioredis does not redirect, beside a keyed command) that throws its
   * first error, sent while the queue's slot is MIGRATING: its key is absent, so the source
   * answers ASK every time. `sends` counts the attempts; past 20 it stops the loop (a plain error).
   */
  async function redirectedPipeline(on: 'cluster' | 'source node' = 'cluster') {
    const [source, target] = await harness.masters();
    const client = on === 'cluster' ? cluster : harness.node(source!);
    const q = await queueOn(source!);
    await migrating(q.slot, source!, target!);
    const probe = { sends: 0, revertBefore: 0 };
    const send = async () => {
      if (++probe.sends > 20) throw new Error('sent more than 20 times');
      if (probe.sends === probe.revertBefore) {
        await harness.revertMigration(q.slot, source!, target!);
        ended(q.slot);
      }
      const out = (await (client as Cluster).pipeline().client('INFO').persist(`${q.prefix}:absent`).exec()) ?? [];
      for (const [err] of out) if (err) throw err;
      return out;
    };
    return { probe, send, client };
  }
  /** Date.now() frozen at `now` (timers, ioredis and the pause run on real time) until the test ends. */
  function freezeDate(now: number): void {
    const timers = ['hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate'] as const;
    const more = ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout'] as const;
    jest.useFakeTimers({ doNotFake: [...timers, ...more], now });
  }

  it('a pipeline refused with a redirection is sent again until it is not: its replies then come back', async () => {
    const { probe, send } = await redirectedPipeline();
    probe.revertBefore = 3; // the slot is STABLE again before the third attempt
    const replies = await withRedirects(cluster, send);
    expect(probe.sends).toBe(3);
    expect(replies.map(([err, value]) => [err, typeof value])).toEqual([
      [null, 'string'],
      [null, 'number'],
    ]);
  });

  it('a pipeline redirected every time is sent 16 times in all (however fast), then the redirection is thrown', async () => {
    const { probe, send } = await redirectedPipeline();
    freezeDate(Date.now()); // the 2 s bound never ends it
    await expect(withRedirects(cluster, send)).rejects.toThrow(/^ASK /);
    expect(probe.sends).toBe(16);
  });

  it('a pipeline redirected every time is not sent again once 2 s have passed since the first attempt', async () => {
    const { probe, send } = await redirectedPipeline();
    const t0 = Date.now();
    freezeDate(t0);
    const timed = async () => {
      // Date.now() after attempt 2 says 1999 ms, after attempt 3 2000 ms
      if (probe.sends === 1) jest.setSystemTime(t0 + 1999);
      if (probe.sends === 2) jest.setSystemTime(t0 + 2000);
      return send();
    };
    await expect(withRedirects(cluster, timed)).rejects.toThrow(/^ASK /);
    expect(probe.sends).toBe(3);
  });

  it('an error that is no redirection is thrown at once, and on a client that is no Cluster a redirection too', async () => {
    let sends = 0;
    const unknown = withRedirects(cluster, async () => {
      sends++;
      return cluster.call('NO-SUCH-COMMAND');
    });
    await expect(unknown).rejects.toThrow(/unknown command/i);
    expect(sends).toBe(1);

    const { probe, send, client } = await redirectedPipeline('source node');
    await expect(withRedirects(client, send)).rejects.toThrow(/^ASK /);
    expect(probe.sends).toBe(1);
  });

  // last: it kills a master, so the cluster has one master without a replica afterwards
  it('a producer-only engine (waitForReplicas on) keeps enqueuing across a failover: 5 of 5 enqueues of new stages succeed once the new master is up', async () => {
    const [victim] = await harness.masters();
    const q = await queueOn(victim!);
    const engine = await engineOn(q);
    for (let i = 0; i < 3; i++)
      expect(await engine.enqueue({ scope: ['warm', `${i}`], stage: 'image' }, {})).toMatchObject({ added: true });

    const killedAt = Date.now();
    await harness.kill(victim!, 'SIGKILL');
    await harness.waitFailover(victim!, 30_000);
    const upMs = Date.now() - killedAt;
    const promoted = await harness.ownerOf(q.prefix);
    expect(promoted).not.toBe(victim);

    const results = [];
    for (let i = 0; i < 5; i++)
      results.push(await timed(() => engine.enqueue({ scope: ['after', `${i}`], stage: 'image' }, {})));
    figures.failover = { newMasterUpMs: upMs, enqueues: results.map(describeOutcome) };
    expect(results.map((r) => (r.ok ? r.value.added : describeOutcome(r)))).toEqual(Array(5).fill(true));
    expect(await engine.queue.getJobCounts('waiting')).toEqual({ waiting: 8 });
  });
});
