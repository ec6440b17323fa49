import type { StageRef } from '../../../src';
import { expectWindowLeft, harness, notSent } from '../../helpers/engine';

/**
 * The "no lost wake-up" rule. A wake that arrives while an attempt is in flight
 * must make that attempt's deferral short: README "at most `inFlightRetryMs`, not a full
 * window", docs/design.md "a window of `inFlightRetryMs` at most". The engine re-records the
 * deferral with `min(inFlightRetryMs, capacityMaxSeconds)` whatever the window would have
 * been (src/dispatch.ts `defer`, the `recorded.woken` branch), so a wake can LENGTHEN it.
 */
const ref: StageRef = { scope: ['book-1', 'ch'], stage: 'image' };
const NO = notSent('no_worker_available');

describe('C8: a wake during an attempt makes its deferral longer than without the wake', () => {
  it('no lost wake-up: capacitySeconds 1, inFlightRetryMs 5000: a wake in flight never lengthens the 1 s window', async () => {
    const h = harness({ windows: { capacitySeconds: 1, capacityMaxSeconds: 60, jitter: 0 }, inFlightRetryMs: 5000 });
    // capacity returns while the attempt runs; the attempt then answers "no capacity"
    h.executor.script(ref, async () => {
      expect((await h.engine.wakeDeferred({ stage: 'image' })).woken).toEqual([]);
      return NO;
    });
    const r = await h.engine.dispatchStage(ref, {});
    expect(r.reason).toBe('no_worker_available');
    // without the wake the window is 1 s (the first step of the ladder); the wake must not make it longer
    expectWindowLeft(await h.redis.pttl(h.engine.deferredStageKey(ref)), 1000);
  });

  it('a retryAfterMs hint of 100 ms and a wake in flight: the window stays the hint, not inFlightRetryMs', async () => {
    const h = harness({ windows: { capacitySeconds: 30, capacityMaxSeconds: 600, jitter: 0 } });
    h.executor.script(ref, async () => {
      await h.engine.wakeDeferred({ stage: 'image' });
      return notSent('no_worker_available', { retryAfterMs: 100 });
    });
    const until: number[] = [];
    h.engine.on('deferred', (e) => until.push(e.until));
    // (Redis' time to the ms: seconds alone left up to 999 ms of slack, and the bound a few ms)
    const [sec, usec] = await h.redis.time();
    const t0 = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    await h.engine.dispatchStage(ref, {});
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(ref));
    // the stage asked to be asked again after 100 ms (jitter 0): the signal must not push it to 1 s
    expect(until).toHaveLength(1);
    expect(pttl).toBeLessThanOrEqual(100);
    expect(until[0]! - t0).toBeLessThan(1000);
  });

  it('a retryAfterMs hint of 60 s and a wake in flight: the hint stands (the stage never asks before it)', async () => {
    // README's table: "the window is the hint ... lengthened (never shortened)"; docs/design.md:
    // "(never earlier than the hint)". The wake rule re-records 1 s and drops the hint. Either the
    // docs say the wake overrides a hint, or the hint wins: today they contradict each other.
    const h = harness({ windows: { capacitySeconds: 30, capacityMaxSeconds: 600, jitter: 0 } });
    h.executor.script(ref, async () => {
      await h.engine.wakeDeferred({ stage: 'image' });
      return notSent('no_worker_available', { retryAfterMs: 60_000 });
    });
    await h.engine.dispatchStage(ref, {});
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(ref));
    expect(pttl).toBeGreaterThan(55_000);
  });
});
