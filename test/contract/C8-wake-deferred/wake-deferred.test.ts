import type { StageRef } from '../../../src';
import { expectUnwritten, expectWindowLeft, harness, notSent, SENT, snapshot } from '../../helpers/engine';
import { heldExecutor } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { setChainStart } from '../../helpers/observe';

/** wake deferred stages when capacity returns, adaptive windows, retry-after hints. */
const ref = (book: string, stage = 'image'): StageRef => ({ scope: [book, 'ch'], stage });
const NO = notSent('no_worker_available');
const long = { windows: { capacitySeconds: 60, jitter: 0 } };

describe('C8: wakeDeferred', () => {
  it('wakes the longest-waiting capacity chain first (by when the chain began, not by due time or latest deferral)', async () => {
    // a's second window doubles (120 s): due well after b's (60 s), whatever the machine's speed
    const h = harness({ windows: { ...long.windows, capacityMaxSeconds: 600 } });
    const a = ref('a');
    const b = ref('b');
    h.executor.fallback = NO;
    await h.engine.dispatchStage(a, {}); // a's chain begins
    await h.engine.dispatchStage(b, {}); // b's chain begins later
    // a defers again (its chain goes on), so its latest deferral is now the newest and due last
    await h.redis.del(h.engine.deferredStageKey(a));
    await h.engine.dispatchStage(a, {});
    const [la] = await h.engine.listDeferred(['a']);
    const [lb] = await h.engine.listDeferred(['b']);
    expect(la!.deferrals).toBe(2);
    // the window ends as recorded (in the wake-up ids), not as read back through TTLs at two moments
    expect(la!.until).toBeGreaterThan(lb!.until);
    expect((await h.engine.wakeDeferred()).woken).toEqual([a]);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    expect(await h.engine.isStageDeferred(b)).toBe(true);
  });

  it.each([
    ['across stage kinds (no filter: the kinds’ indexes merged)', [] as string[], 'a'],
    ['under a scope prefix (the licence index’s range, sorted)', ['s'], 's'],
  ])('%s: the longest-waiting chain first, ties by stage id', async (_n, scope, book) => {
    const h = harness(long);
    h.executor.fallback = NO;
    // four stages of two kinds; b and c tie, and their stage ids order them against their kinds' order
    const at = (n: string, stage: string): StageRef =>
      book === 's' ? { scope: ['s', n], stage } : { scope: [n, 'ch'], stage };
    const [a, b, c, d] = [at('a', 'video'), at('b', 'video'), at('c', 'image'), at('d', 'image')];
    for (const s of [a, b, c, d]) await h.engine.dispatchStage(s, {});
    // the chains' start times, set by hand in the kinds' wait indexes: d waits longest, a least
    const started: [StageRef, number][] = [
      [a, 3000],
      [b, 2000],
      [c, 2000],
      [d, 1000],
    ];
    for (const [s, ms] of started) expect(await setChainStart(h.redis, h, s, ms)).toBe(true);
    expect((await h.engine.wakeDeferred({ limit: 4, ...(scope.length > 0 ? { scope } : {}) })).woken).toEqual([
      d,
      b,
      c,
      a,
    ]);
  });

  it('a kind’s wait index is read 200 entries at a time: the 201st waiting stage is woken too', async () => {
    const h = harness(long);
    h.executor.fallback = NO;
    const stages = Array.from({ length: 201 }, (_, i) => ref(`p${String(i).padStart(3, '0')}`));
    for (const s of stages) await h.engine.dispatchStage(s, {});
    const { woken } = await h.engine.wakeDeferred({ limit: 300 });
    expect(woken).toHaveLength(201);
    expect(new Set(woken.map((s) => s.scope[0])).size).toBe(201);
  });

  it('limit, scope and stage filters combine with AND; idempotent deferrals are never woken', async () => {
    const h = harness(long);
    const stages = [ref('a'), ref('a', 'video'), ref('b'), ref('b', 'video'), ref('c')];
    h.executor.fallback = NO;
    for (const s of stages) await h.engine.dispatchStage(s, {});
    const idem = ref('a', 'audio');
    h.executor.script(idem, notSent('already_completed'));
    await h.engine.dispatchStage(idem, {});
    expect((await h.engine.wakeDeferred({ scope: ['a'], stage: 'video', limit: 10 })).woken).toEqual([
      ref('a', 'video'),
    ]);
    expect((await h.engine.wakeDeferred({ stage: 'image', limit: 2 })).woken).toEqual([ref('a'), ref('b')]);
    expect((await h.engine.wakeDeferred({ scope: ['a'], limit: 10 })).woken).toEqual([]);
    expect((await h.engine.wakeDeferred({ limit: 10 })).woken).toEqual([ref('b', 'video'), ref('c')]);
    expect(await h.engine.isStageDeferred(idem)).toBe(true);
  });

  it('a woken stage is dispatched once by its promoted wake-up, not again at its old due time, and its chain goes on', async () => {
    // the second deferral (after the wake) waits 60 s (the downstream's hint), far past the first one's
    // old due time, so a third call before it can only be the old wake-up running again. The first
    // window is short (the test waits out its due time) but must still be open at the wake:
    // wakeDeferred comes right after the deferral, and the worker only then
    const h = harness({ windows: { capacitySeconds: 2, capacityMaxSeconds: 60, jitter: 0 } });
    const a = ref('a');
    h.executor.script(a, NO, notSent('no_worker_available', { retryAfterMs: 60_000 }), SENT);
    // the first deferral from its event (its `until` by Redis' clock), not from listDeferred
    const deferred: { until: number; wakeUpJobId: string }[] = [];
    h.engine.on('deferred', (e) => deferred.push(e));
    const early: unknown[] = [];
    h.engine.on('woken', (e) => e.early && early.push(e));
    await h.engine.dispatchStage(a, {});
    expect((await h.engine.wakeDeferred({ stage: 'image' })).woken).toEqual([a]);
    expect(early).toHaveLength(1);
    const before = deferred[0];
    const worker = h.engine.createWorker();
    const done: Record<string, unknown>[] = [];
    worker.on('completed', (_j, r) => done.push(r as Record<string, unknown>));
    // its promoted wake-up runs now: capacity again, so the chain goes on (2nd deferral)
    await waitFor(() => done.length === 1, 'the woken wake-up ran');
    const [after] = await h.engine.listDeferred();
    expect(after!.wakeUpJobId).toMatch(/@cap\.2\.0\.0\./);
    // past the first wake-up's old due time, it has not run again
    await waitFor(async () => Number((await h.redis.time())[0]) * 1000 > before!.until + 100, 'the old due time');
    expect(h.executor.calls).toHaveLength(2);
    await worker.close();
  });

  it('a signal during an attempt that then defers is not lost: that deferral is short (at most inFlightRetryMs)', async () => {
    const { executor, running, release } = heldExecutor(NO);
    // inFlightRetryMs 5 s: short next to the 60 s window, and still open when the test reads the TTL
    const h = harness({ ...long, inFlightRetryMs: 5000, executor });
    const a = ref('a');
    const attempt = h.engine.dispatchStage(a, {});
    await running;
    // capacity returns while the attempt is about to answer "no capacity": nothing is deferred to wake yet
    expect((await h.engine.wakeDeferred({ stage: 'image' })).woken).toEqual([]);
    release();
    const r = await attempt;
    expect(r.reason).toBe('no_worker_available');
    expectWindowLeft(await h.redis.pttl(h.engine.deferredStageKey(a)), 5000);
  });

  it('a signal for another stage kind does not shorten a deferral', async () => {
    const { executor, running, release } = heldExecutor(NO);
    const h = harness({ ...long, inFlightRetryMs: 200, executor });
    const attempt = h.engine.dispatchStage(ref('a'), {});
    await running;
    await h.engine.wakeDeferred({ stage: 'video' });
    release();
    await attempt;
    expect(await h.redis.pttl(h.engine.deferredStageKey(ref('a')))).toBeGreaterThan(50_000);
  });

  it('races with cancel and clear: a cancelled or cleared stage is not woken, and counts nothing', async () => {
    const h = harness(long);
    h.executor.fallback = NO;
    const [a, b, c] = [ref('a'), ref('b'), ref('c')];
    for (const s of [a, b, c]) await h.engine.dispatchStage(s, {});
    await h.engine.cancelActiveDispatch(a);
    expect(await h.engine.clearDeferrals(['b'])).toBe(1);
    const all = await Promise.all([h.engine.wakeDeferred({ limit: 5 }), h.engine.wakeDeferred({ limit: 5 })]);
    expect(all.flatMap((x) => x.woken)).toEqual([c]);
  });

  it.each([
    ['limit 0', { limit: 0 }],
    ['limit 10,001', { limit: 10_001 }],
    ['limit NaN', { limit: Number.NaN }],
    ['limit 1.5', { limit: 1.5 }],
  ])('%s: INVALID_OPTIONS before anything is written', async (_what, filter) => {
    const h = harness(long);
    h.executor.fallback = NO;
    await h.engine.dispatchStage(ref('a'), {});
    const before = await snapshot(h.redis, h.prefix);
    await expect(h.engine.wakeDeferred(filter)).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
  });

  it('a malformed scope or stage: INVALID_STAGE_REF before anything is written', async () => {
    const h = harness(long);
    h.executor.fallback = NO;
    await h.engine.dispatchStage(ref('a'), {});
    const before = await snapshot(h.redis, h.prefix);
    await expect(h.engine.wakeDeferred({ scope: [''] })).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.wakeDeferred({ stage: '' })).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.wakeDeferred({ scope: 'a' as never })).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
  });
});
