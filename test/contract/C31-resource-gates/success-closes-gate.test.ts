import { noCapacity, type StageRef } from '../../../src';
import { harness, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { redisNow } from '../../helpers/observe';

/**
 * A success that saw `capacityLeft: 0` closes its resource's gate for the capacity window
 * (not a few ms of it), says so (`gateClosed`, `no_capacity_left`) and opens nothing; a capacity
 * answer at the deferral bound still closes its gate for its window; a gated dispatch's answer
 * says what happened to it.
 */
const stage = (n: number): StageRef => ({ scope: ['book-g', `sc-${n}`], stage: 'image' });

describe('C31: a success that saw capacityLeft: 0 closes the gate for the capacity window', () => {
  it('C31: emits gateClosed (no_capacity_left, until = now + the capacity window), no gateOpened, and the next stage is gated', async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 30, jitter: 0 } });
    const closed: { resource: string; until: number; reason: string }[] = [];
    const opened: unknown[] = [];
    h.engine.on('gateClosed', (e) => closed.push(e));
    h.engine.on('gateOpened', (e) => opened.push(e));
    h.executor.script(stage(0), { ...SENT, capacityLeft: 0 });
    const before = await redisNow(h.redis);
    const sent = await h.engine.dispatchStage(stage(0), {});
    const after = await redisNow(h.redis);
    expect(sent).toMatchObject({ dispatched: true });
    expect(closed).toHaveLength(1);
    expect(closed[0]).toMatchObject({ resource: 'gpu', reason: 'no_capacity_left' });
    expect(closed[0]?.until).toBeGreaterThanOrEqual(before + 30_000 - 1000);
    expect(closed[0]?.until).toBeLessThanOrEqual(after + 30_000 + 1000);
    // nothing opened: the gate was open, and the success closed it
    expect(opened).toHaveLength(0);
    // well into the window (a few hundred ms of Redis' time), another stage of the resource is gated
    await waitFor(async () => (await redisNow(h.redis)) > after + 300, 'Redis time to move on 300 ms');
    const r = await h.engine.dispatchStage(stage(1), {});
    expect(h.executor.callsFor(stage(1))).toBe(0);
    expect(r).toMatchObject({ dispatched: false, reason: 'gate_closed' });
  });
});

describe('C31: a gated dispatch answers a capacity deferral that names no executor answer', () => {
  it('C31: the answer is gate_closed, not sent, retryable, with a window, and its result says nothing was sent', async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 30, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    const r = await h.engine.dispatchStage(stage(1), {});
    expect(h.executor.callsFor(stage(1))).toBe(0);
    expect(r).toMatchObject({ dispatched: false, reason: 'gate_closed', retryable: true });
    expect(r.until).toBeGreaterThan(await redisNow(h.redis));
    expect(r.result).toMatchObject({ dispatched: false, reason: 'gate_closed' });
  });
});

describe('C31: a capacity answer at the deferral bound closes its gate all the same', () => {
  it('C31: the limit failure emits gateClosed with an until in the future, and the gate holds the next stage', async () => {
    const h = harness({
      resourceOf: () => 'gpu',
      windows: { capacitySeconds: 0.3, capacityMaxSeconds: 600, jitter: 0 },
      limits: { maxCapacityDeferrals: 1 },
    });
    const closed: { until: number; reason: string }[] = [];
    h.engine.on('gateClosed', (e) => closed.push(e));
    // (the answer at the bound asks for 10 min: its gate is still closed when the test reads it, however slow the machine)
    h.executor.script(stage(0), noCapacity(), noCapacity({ retryAfterMs: 600_000 }));
    const first = await h.engine.dispatchStage(stage(0), {});
    expect(first).toMatchObject({ reason: 'no_capacity' });
    // the window (and the gate's) ends: the next dispatch is the probe, and its answer is past the bound
    await waitFor(async () => (await redisNow(h.redis)) > first.until! + 50, 'the window to end');
    const limited = await h.engine.dispatchStage(stage(0), {});
    expect(limited).toMatchObject({ dispatched: false, limitReached: true });
    expect(closed).toHaveLength(2);
    expect(closed[1]?.until).toBeGreaterThan(await redisNow(h.redis));
    const r = await h.engine.dispatchStage(stage(1), {});
    expect(h.executor.callsFor(stage(1))).toBe(0);
    expect(r).toMatchObject({ reason: 'gate_closed' });
  });
});
