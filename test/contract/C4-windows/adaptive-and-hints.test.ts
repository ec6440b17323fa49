import type { StageRef } from '../../../src';
import { windowFor } from '../../../src/windows';
import { expectWindowLeft, harness, notSent, SENT } from '../../helpers/engine';

/** wake deferred stages when capacity returns, adaptive windows, retry-after hints. */
const ref = (book: string, stage = 'image'): StageRef => ({ scope: [book, 'ch'], stage });
const NO = notSent('no_worker_available');
const long = { windows: { capacitySeconds: 60, jitter: 0 } };

describe('C4: adaptive capacity windows', () => {
  const windows = { capacitySeconds: 2, capacityMaxSeconds: 10, idempotentSeconds: 300, jitter: 0 };
  it('the n-th capacity deferral waits min(max, base × 2^(n-1)), jittered downwards only', () => {
    expect([1, 2, 3, 4, 5].map((n) => windowFor(windows, 'capacity', n, undefined))).toEqual([
      2000, 4000, 8000, 10_000, 10_000,
    ]);
    const jittered = { ...windows, jitter: 0.2 };
    expect(windowFor(jittered, 'capacity', 4, undefined, () => 1)).toBe(8000);
    expect(windowFor(jittered, 'capacity', 4, undefined, () => 0)).toBe(10_000);
    // the default: capacityMaxSeconds = capacitySeconds, a fixed window
    expect(windowFor({ ...windows, capacityMaxSeconds: 2 }, 'capacity', 5, undefined)).toBe(2000);
    expect(windowFor(windows, 'idempotent', 5, undefined)).toBe(300_000);
  });

  it('real deferrals grow 1 s, 2 s, 4 s; a success starts again from the base', async () => {
    const h = harness({ windows: { capacitySeconds: 1, capacityMaxSeconds: 4, jitter: 0 } });
    const a = ref('a');
    h.executor.script(a, NO, NO, NO, SENT, NO);
    const pttls: number[] = [];
    for (let i = 0; i < 5; i++) {
      await h.redis.del(h.engine.deferredStageKey(a));
      await h.engine.dispatchStage(a, {});
      pttls.push(await h.redis.pttl(h.engine.deferredStageKey(a)));
    }
    // each window as long as its step, read a moment later (the fourth dispatch succeeded: no marker)
    const windows = [1000, 2000, 4000, undefined, 1000];
    pttls.forEach((p, i) => {
      const w = windows[i];
      if (w === undefined) return expect(p).toBe(-2);
      expect(p).toBeGreaterThan(w - 1000);
      expectWindowLeft(p, w);
    });
  });

  it('capacityMaxSeconds below capacitySeconds is INVALID_OPTIONS', () => {
    expect(() => harness({ windows: { capacitySeconds: 30, capacityMaxSeconds: 10 } })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTIONS' }),
    );
  });
});

describe('C4: retry-after hints', () => {
  const windows = { capacitySeconds: 30, capacityMaxSeconds: 600, idempotentSeconds: 300, jitter: 0.2 };
  it('clamped to [50 ms, the maximum], jittered upwards only', () => {
    expect(windowFor(windows, 'capacity', 1, 5000, () => 0)).toBe(5000);
    expect(windowFor(windows, 'capacity', 1, 5000, () => 1)).toBe(6000);
    expect(windowFor(windows, 'capacity', 1, 1, () => 0)).toBe(50);
    expect(windowFor(windows, 'capacity', 1, 10_000_000, () => 1)).toBe(600_000);
    // it replaces the adaptive step, and is ignored for idempotent outcomes
    expect(windowFor(windows, 'capacity', 7, 5000, () => 0)).toBe(5000);
    expect(windowFor(windows, 'idempotent', 1, 5000, () => 0)).toBe(300_000 * 1);
  });

  it('a real deferral with retryAfterMs 5000 waits at least 5 s, spends no attempt', async () => {
    const h = harness({ windows: { capacitySeconds: 1, jitter: 0.2 } });
    const a = ref('a');
    h.executor.script(a, notSent('no_worker_available', { retryAfterMs: 5000 }));
    await h.engine.dispatchStage(a, {});
    // the window is capped by capacityMaxSeconds (= capacitySeconds = 1 s here)
    expectWindowLeft(await h.redis.pttl(h.engine.deferredStageKey(a)), 1000);
    const g = harness({ windows: { capacitySeconds: 1, capacityMaxSeconds: 60, jitter: 0.2 } });
    g.executor.script(a, notSent('no_worker_available', { retryAfterMs: 5000 }));
    const started = performance.now();
    await g.engine.dispatchStage(a, {});
    const hinted = await g.redis.pttl(g.engine.deferredStageKey(a));
    // at least 5 s from the deferral: less the time since (not a fixed 100 ms of it)
    expect(hinted).toBeGreaterThan(4900 - (performance.now() - started));
    expectWindowLeft(hinted, 6000);
  });

  it.each([-1, Number.NaN, '5000'])('retryAfterMs %p is INVALID_EXECUTOR_RESULT', async (bad) => {
    const h = harness(long);
    const a = ref('a');
    h.executor.script(a, notSent('no_worker_available', { retryAfterMs: bad as number }));
    await expect(h.engine.dispatchStage(a, {})).rejects.toMatchObject({ code: 'INVALID_EXECUTOR_RESULT' });
    expect(await h.engine.isStageDeferred(a)).toBe(false);
  });
});
