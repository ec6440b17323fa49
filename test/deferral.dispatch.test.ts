import { harness, notSent, SENT, snapshot, expectUnwritten, expectWindowLeft } from './helpers/engine';
import { keysUnder, waitFor } from './helpers/redis';
import { stageId } from '../src';

const scene = ['book-1', 'ch-2', 'sc-7'];
const image = { scope: scene, stage: 'image' };
const video = { scope: scene, stage: 'video' };

describe('clause 1: a deferrable outcome defers the stage for its class window', () => {
  it('returns the outcome, retryable, with the executor result; calls rollback once and journals once', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'));
    const before = Date.now();
    const r = await h.engine.dispatchStage(image, { p: 1 }, { buildId: 'b1' });
    expect(r).toMatchObject({ dispatched: false, reason: 'no_worker_available', retryable: true });
    expect(r.result).toMatchObject({ dispatched: false, reason: 'no_worker_available', retryable: true });
    expect(r.until).toBeGreaterThanOrEqual(before + 30_000 - 50);
    expect(h.rollbacks).toEqual([{ ref: image, reason: 'no_worker_available' }]);
    expect(h.journal).toHaveLength(1);
    expect(h.journal[0]!.event).toMatchObject({
      type: 'stage_deferred',
      reason: 'no_worker_available',
      class: 'capacity',
      deferrals: 1,
    });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(image));
    expect(pttl).toBeGreaterThan(29_000);
    expectWindowLeft(pttl, 30_000);
  });

  it('uses the idempotent window for already_completed', async () => {
    const h = harness();
    h.executor.script(image, notSent('already_completed'));
    await h.engine.dispatchStage(image, {});
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(image));
    expect(pttl).toBeGreaterThan(119_000);
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ reason: 'deferred_idempotent', deferred: true });
  });

  it('reports the dominant notSent reason', async () => {
    const h = harness();
    h.executor.script(
      image,
      notSent('no_jobs_sent', {
        notSent: new Map([
          ['duplicate_pending', 1],
          ['ambiguous_post', 3],
        ]),
      }),
    );
    const r = await h.engine.dispatchStage(image, {});
    expect(r.reason).toBe('ambiguous_post');
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });

  it('does not defer when notSent holds a real failure', async () => {
    const h = harness();
    h.executor.script(
      image,
      notSent('no_worker_available', {
        notSent: new Map([
          ['no_worker_available', 3],
          ['send_failed', 1],
        ]),
      }),
    );
    const r = await h.engine.dispatchStage(image, {});
    // the executor's own reason is capacity, but the attempt also had a real failure: that one is reported
    expect(r).toMatchObject({ dispatched: false, reason: 'send_failed' });
    expect(r.deferred).toBeUndefined();
    expect(h.journal).toHaveLength(0);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('journals one deferral when several engines defer the same stage at once', async () => {
    const h = harness();
    const others = [1, 2, 3].map(() => harness({}, { prefix: h.prefix, queueName: h.queueName }));
    for (const x of [h, ...others]) x.executor.fallback = notSent('no_worker_available');
    const results = await Promise.all([h, ...others].map((x) => x.engine.dispatchStage(image, {})));
    const journalled = [h, ...others].reduce((n, x) => n + x.journal.length, 0);
    const executed = [h, ...others].reduce((n, x) => n + x.executor.calls.length, 0);
    expect(journalled).toBe(1);
    expect(executed).toBe(1);
    expect(results.filter((r) => r.reason === 'no_worker_available')).toHaveLength(1);
    expect(await h.engine.listDeferred()).toHaveLength(1);
    expect(await h.redis.zcard(`${h.prefix}:${h.queueName}:delayed`)).toBe(1);
  });
});

describe('clause 2: while deferred, dispatchStage has no side effect at all', () => {
  it('returns deferred_capacity with until, and calls nothing and writes nothing, even with force', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'));
    const first = await h.engine.dispatchStage(image, {});
    const before = await snapshot(h.redis, h.prefix);
    for (const force of [false, true]) {
      const r = await h.engine.dispatchStage(image, {}, { force });
      expect(r).toMatchObject({ dispatched: false, reason: 'deferred_capacity', retryable: true, deferred: true });
      expect(Math.abs((r.until ?? 0) - (first.until ?? 0))).toBeLessThan(1000);
    }
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect(h.executor.calls).toHaveLength(1);
    expect(h.rollbacks).toHaveLength(1);
    expect(h.journal).toHaveLength(1);
  });
});

describe('clause 3: ticks inside the window cost one executor call', () => {
  it('100 ticks -> 1 executor call, 1 journal event, 1 rollback', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    for (let i = 0; i < 100; i++) await h.engine.dispatchStage(image, {});
    expect(h.executor.calls).toHaveLength(1);
    expect(h.journal).toHaveLength(1);
    expect(h.rollbacks).toHaveLength(1);
  });
});

describe('clause 4: the deferred-stage key', () => {
  it('is under the prefix, has the remaining window as TTL, and deleting it ends the deferral at once', async () => {
    const h = harness();
    h.executor.script(image, notSent('duplicate_pending'));
    await h.engine.dispatchStage(image, {});
    const key = h.engine.deferredStageKey(image);
    expect(key.startsWith(`${h.prefix}:`)).toBe(true);
    expect(await h.redis.exists(key)).toBe(1);
    await h.redis.del(key);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    const r = await h.engine.dispatchStage(image, {});
    expect(r.dispatched).toBe(true);
    expect(h.executor.calls).toHaveLength(2);
  });
});

describe('clause 6: in flight and success', () => {
  it('14.5: a second dispatch while one is in flight returns dispatch_in_flight with no side effect', async () => {
    const h = harness();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    h.executor.script(image, async () => {
      await gate;
      return SENT;
    });
    const first = h.engine.dispatchStage(image, {});
    await waitFor(() => h.executor.calls.length === 1, 'first executor call');
    const before = await snapshot(h.redis, h.prefix);
    expect([...before.keys()]).toContain(`${h.prefix}:${h.queueName}:sd:inflight:${stageId(image)}`);
    const second = await h.engine.dispatchStage(image, {});
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect(second).toEqual({ dispatched: false, reason: 'dispatch_in_flight', retryable: true });
    expect(h.executor.calls).toHaveLength(1);
    release();
    expect((await first).dispatched).toBe(true);
    const third = await h.engine.dispatchStage(image, {});
    expect(third.dispatched).toBe(true);
    expect(h.executor.calls).toHaveLength(2);
  });

  it('a successful dispatch leaves nothing of the stage in Redis', async () => {
    const h = harness();
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ dispatched: true, reason: null, retryable: false });
    const keys = await keysUnder(h.redis, h.prefix);
    // the queue's fencing counter is the queue's, not the stage's
    expect(keys.filter((k) => k.includes('sd:') && !k.endsWith(':sd:fence'))).toEqual([]);
  });
});

describe('clause 8: deferral is per stage', () => {
  it('another stage of the scene and the same stage of another book are not blocked', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    expect((await h.engine.dispatchStage(video, {})).dispatched).toBe(true);
    expect((await h.engine.dispatchStage({ scope: ['book-2', 'ch-2', 'sc-7'], stage: 'image' }, {})).dispatched).toBe(
      true,
    );
    expect((await h.engine.dispatchStage({ scope: ['book-1', 'ch-2'], stage: 'image' }, {})).dispatched).toBe(true);
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });
});

describe('clause 13: outcomes are results, not exceptions', () => {
  it.each(['no_jobs_sent', 'no_jobs_generated', 'send_failed', 'already_ready', 'circuit_open', 'brand_new'])(
    '%s is returned (not deferred, not thrown), rollback called once',
    async (reason) => {
      const h = harness();
      h.executor.script(image, notSent(reason, { retryable: false }));
      const r = await h.engine.dispatchStage(image, {});
      expect(r).toMatchObject({ dispatched: false, reason, retryable: false });
      expect(h.rollbacks).toEqual([{ ref: image, reason }]);
      expect(h.journal).toHaveLength(0);
      expect(await h.engine.isStageDeferred(image)).toBe(false);
      expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    },
  );

  it('rethrows what the executor threw and releases the stage', async () => {
    const h = harness();
    const boom = new Error('downstream exploded');
    h.executor.script(image, boom);
    await expect(h.engine.dispatchStage(image, {})).rejects.toBe(boom);
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
  });

  it('rejects an executor result of the wrong shape with a typed error', async () => {
    const h = harness();
    h.executor.script(image, { dispatched: 'yes' } as never);
    await expect(h.engine.dispatchStage(image, {})).rejects.toMatchObject({ code: 'INVALID_EXECUTOR_RESULT' });
  });

  it('passes buildId and force to the executor', async () => {
    const h = harness();
    await h.engine.dispatchStage(image, { x: 1 }, { buildId: 'b-9', force: true });
    expect(h.executor.calls[0]).toMatchObject({ payload: { x: 1 }, buildId: 'b-9', force: true });
  });
});

describe('events', () => {
  it('emits deferred then suppressed, and dispatched', async () => {
    const h = harness();
    const seen: string[] = [];
    for (const name of ['deferred', 'suppressed', 'dispatched', 'failed'] as const)
      h.engine.on(name, () => seen.push(name));
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(video, {});
    h.executor.script(video, notSent('send_failed'));
    await h.engine.dispatchStage(video, {});
    expect(seen).toEqual(['deferred', 'suppressed', 'dispatched', 'failed']);
  });
});
