import { dispatched, noCapacity, type StageRef } from '../../../src';
import { harness, LONG_WINDOWS, notSent, SENT, type Harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { redisNow } from '../../helpers/observe';

/**
 * A stage that needs a resource whose gate a capacity answer closed defers at once: no executor
 * call, no rollback, one wake-up in the resource's line; one probe per window asks again.
 */
const stage = (n: number): StageRef => ({ scope: ['book-g', `sc-${n}`], stage: 'image' });
const gpu = () => 'gpu';
const gateKey = (h: Harness) => `${h.prefix}:${h.queueName}:sd:gate:gpu`;

/** Waits until the gate's window (its value, on Redis' clock) has ended. */
async function gateWindowEnds(h: Harness): Promise<void> {
  await waitFor(async () => {
    const g = await h.redis.get(gateKey(h));
    return g !== null && Number(g) <= (await redisNow(h.redis));
  }, 'the gate window to end');
}

describe('C31: while a resource gate is closed', () => {
  it('a dispatch of a stage that needs it defers at once, calling no executor and no rollback', async () => {
    const h = harness({ resourceOf: gpu });
    const closed: unknown[] = [];
    h.engine.on('gateClosed', (e) => closed.push(e));
    h.executor.script(stage(1), noCapacity());
    await h.engine.dispatchStage(stage(1), {});
    expect(closed).toEqual([expect.objectContaining({ resource: 'gpu', ref: stage(1), reason: 'no_capacity' })]);
    const before = h.executor.calls.length;
    const r = await h.engine.dispatchStage(stage(2), { n: 2 });
    expect(r).toMatchObject({ dispatched: false, reason: 'gate_closed', retryable: true });
    expect(h.executor.calls.length).toBe(before);
    expect(h.rollbacks.map((x) => x.ref)).toEqual([stage(1)]);
    const listed = await h.engine.listDeferred(['book-g']);
    expect(listed.map((d) => [d.ref.scope[1], d.reason, d.class, d.deferrals, d.resource])).toEqual([
      ['sc-1', 'no_capacity', 'capacity', 1, 'gpu'],
      ['sc-2', 'gate_closed', 'capacity', 1, 'gpu'],
    ]);
    // one delayed wake-up, as any deferral; the gate's window is the answer's (30 s)
    const wakeUp = await h.engine.queue.getJob(listed[1]!.wakeUpJobId);
    expect(await wakeUp!.getState()).toBe('delayed');
    expect(wakeUp!.data).toMatchObject({ resource: 'gpu', reason: 'gate_closed', payload: { n: 2 } });
    // it never comes back before the gate's window ends
    expect(listed[1]!.until).toBeGreaterThanOrEqual(Number(await h.redis.get(gateKey(h))));
  });

  it('a capacity answer naming a resource closes that gate, for stages whose resourceOf names it', async () => {
    const h = harness({
      resourceOf: (ref) => (ref.scope[1] === 'sc-1' ? undefined : 'gpu'),
      windows: { capacitySeconds: 30, capacityMaxSeconds: 600, jitter: 0 },
    });
    h.executor.script(stage(1), noCapacity({ resource: 'gpu', retryAfterMs: 60_000 }));
    await h.engine.dispatchStage(stage(1), {});
    const g = Number(await h.redis.get(gateKey(h)));
    expect(g - (await redisNow(h.redis))).toBeGreaterThan(50_000);
    expect(await h.engine.dispatchStage(stage(2), {})).toMatchObject({ reason: 'gate_closed' });
    expect(h.executor.callsFor(stage(2))).toBe(0);
  });

  it('the answer that closes the gate defers its stage for the full window when nothing woke the line', async () => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(1), noCapacity());
    const before = await redisNow(h.redis);
    expect(await h.engine.dispatchStage(stage(1), {})).toMatchObject({ dispatched: false, reason: 'no_capacity' });
    const [d] = await h.engine.listDeferred(['book-g']);
    expect(d!.until - before).toBeGreaterThan(50_000);
    expect(Number(await h.redis.get(gateKey(h))) - before).toBeGreaterThan(50_000);
  });

  it.each([
    ['a capacity answer', noCapacity(), { dispatched: false, reason: 'no_capacity' }],
    ['a success that saw no slot left', dispatched(1, { capacityLeft: 0 }), { dispatched: true }],
  ])('%s while another answer keeps the gate closed reports no closing of its own', async (_, answer, result) => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } });
    const closed: { ref: StageRef; reason: string }[] = [];
    h.engine.on('gateClosed', (e) => closed.push(e));
    h.executor.script(stage(2), noCapacity());
    // stage 1 is in flight (begun with the gate open) when stage 2's answer closes the gate
    h.executor.script(stage(1), async () => {
      await h.engine.dispatchStage(stage(2), {});
      return answer;
    });
    expect(await h.engine.dispatchStage(stage(1), {})).toMatchObject(result);
    expect(closed.map((e) => [e.ref, e.reason])).toEqual([[stage(2), 'no_capacity']]);
    expect(await h.engine.dispatchStage(stage(3), {})).toMatchObject({ reason: 'gate_closed' });
  });

  it('a stage with no resource reads no gate: it is dispatched as before, and no gate key is written', async () => {
    const h = harness({ resourceOf: () => undefined });
    h.executor.script(stage(1), notSent('no_worker_available'));
    await h.engine.dispatchStage(stage(1), {});
    expect(await h.engine.dispatchStage(stage(2), {})).toMatchObject({ dispatched: true });
    expect(await h.redis.keys(`${h.prefix}:${h.queueName}:sd:gate:*`)).toEqual([]);
  });
});

describe('C31: one probe per window', () => {
  it('when the window ends, one dispatch probes; the others, begun with it, stay gated', async () => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 0.3, capacityMaxSeconds: 600, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await gateWindowEnds(h);
    // (the probe's answer asks for 10 min: the gate it closes stays closed for the dispatches after it, however slow the machine)
    h.executor.fallback = noCapacity({ retryAfterMs: 600_000 });
    const results = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map((n) => h.engine.dispatchStage(stage(n), {})));
    expect(h.executor.calls.length).toBe(2);
    expect(results.filter((r) => r.reason === 'gate_closed')).toHaveLength(7);
    expect(results.filter((r) => r.reason === 'no_capacity')).toHaveLength(1);
    // the probe's answer closed the gate again: the next window has no probe until it ends
    expect(await h.engine.dispatchStage(stage(9), {})).toMatchObject({ reason: 'gate_closed' });
    expect(h.executor.calls.length).toBe(2);
  });

  it('a probe that never answers gives its turn up after lockMs: the next dispatch probes', async () => {
    // (the gate key outlives its 200 ms window by capacityMaxSeconds, 10 min, and the lease lasts 2 s: both
    // still there at the next dispatch, however slow the machine)
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 0.2, capacityMaxSeconds: 600, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await gateWindowEnds(h);
    // a probe taken by a worker that died: its lease (lockMs) runs out
    const now = await redisNow(h.redis);
    await h.redis.set(gateKey(h), `p${now + 2000}`, 'KEEPTTL');
    expect(await h.engine.dispatchStage(stage(1), {})).toMatchObject({ reason: 'gate_closed' });
    await waitFor(async () => (await redisNow(h.redis)) > now + 2000, 'the lease to end');
    expect(await h.engine.dispatchStage(stage(2), {})).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(stage(1))).toBe(0);
  });
});

describe('C31: a success opens the gate and wakes the line, oldest first, within capacity', () => {
  /**
   * Stage 0 closes the gate for 2 s (its downstream's hint: it waits out of the line; long enough
   * for the n dispatches after it, however slow the machine); stages 1..n wait in the line (oldest
   * first) for a window of their own (60 s); then the gate's window ends.
   */
  async function line(h: Harness, n: number): Promise<void> {
    h.executor.script(stage(0), noCapacity({ retryAfterMs: 2000 }));
    await h.engine.dispatchStage(stage(0), {});
    for (let i = 1; i <= n; i++) await h.engine.dispatchStage(stage(i), {});
    await gateWindowEnds(h);
  }

  it('`capacityLeft` stages of the line wake, in the order they began waiting', async () => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } });
    const woken: StageRef[] = [];
    const opened: unknown[] = [];
    h.engine.on('woken', (e) => woken.push(e.ref));
    h.engine.on('gateOpened', (e) => opened.push(e));
    await line(h, 5);
    h.executor.script(stage(9), dispatched(1, { capacityLeft: 3 }));
    expect(await h.engine.dispatchStage(stage(9), {})).toMatchObject({ dispatched: true });
    expect(woken).toEqual([stage(1), stage(2), stage(3)]);
    expect(opened).toEqual([{ resource: 'gpu', woken: 3 }]);
    expect(await h.redis.exists(gateKey(h))).toBe(0);
    const still = (await h.engine.listDeferred(['book-g'])).map((d) => d.ref.scope[1]);
    // (stage 0's hinted window of 2 s has ended: it is due, no longer deferred)
    expect(still).toEqual(['sc-4', 'sc-5']);
  });

  it('without `capacityLeft`, each success wakes two (1, 2, 4 … in flight), never more than the line holds', async () => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } });
    const woken: StageRef[] = [];
    h.engine.on('woken', (e) => woken.push(e.ref));
    await line(h, 3);
    await h.engine.dispatchStage(stage(9), {});
    expect(woken).toEqual([stage(1), stage(2)]);
    await h.engine.dispatchStage(stage(10), {});
    // stage 3 is the last of the line: one more, not two
    expect(woken).toEqual([stage(1), stage(2), stage(3)]);
    expect(h.executor.calls.filter((c) => c.result === SENT)).toHaveLength(2);
  });

  it('a success of a stage woken from the line (its chain ends) wakes the next of the line', async () => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 })).woken).toEqual([stage(0)]);
    const woken: StageRef[] = [];
    h.engine.on('woken', (e) => woken.push(e.ref));
    expect(await h.engine.dispatchStage(stage(0), {})).toMatchObject({ dispatched: true });
    expect(woken).toEqual([stage(1)]);
  });

  it('a success that saw no slot left (`capacityLeft: 0`) closes the gate and wakes nothing', async () => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } });
    const closed: unknown[] = [];
    h.engine.on('gateClosed', (e) => closed.push(e));
    h.executor.script(stage(1), dispatched(1, { capacityLeft: 0 }));
    expect(await h.engine.dispatchStage(stage(1), {})).toMatchObject({ dispatched: true });
    expect(closed).toEqual([expect.objectContaining({ resource: 'gpu', ref: stage(1) })]);
    expect(await h.engine.dispatchStage(stage(2), {})).toMatchObject({ reason: 'gate_closed' });
    expect(h.executor.calls).toHaveLength(1);
  });

  it('`wakeDeferred({ resource, limit })` opens the gate and wakes the oldest of its line, no probe needed', async () => {
    const h = harness({ resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    for (let i = 1; i <= 4; i++) await h.engine.dispatchStage(stage(i), {});
    const opened: unknown[] = [];
    h.engine.on('gateOpened', (e) => opened.push(e));
    const r = await h.engine.wakeDeferred({ resource: 'gpu', limit: 2 });
    expect(r.woken).toEqual([stage(0), stage(1)]);
    expect(opened).toEqual([{ resource: 'gpu', woken: 2 }]);
    // a plain wake never reads a line
    expect((await h.engine.wakeDeferred({ limit: 10 })).woken).toEqual([]);
    // the gate is open: a dispatch calls the executor
    expect(await h.engine.dispatchStage(stage(7), {})).toMatchObject({ dispatched: true });
  });

  it('`wakeDeferred({ resource })` wakes its line only: a stage deferred without a resource, waiting longer, sleeps on', async () => {
    const plain: StageRef = { scope: ['book-p'], stage: 'image' };
    const h = harness({ resourceOf: (ref) => (ref.scope[0] === 'book-p' ? undefined : 'gpu'), windows: LONG_WINDOWS });
    h.executor.script(plain, noCapacity());
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(plain, {});
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 3 })).woken).toEqual([stage(0), stage(1)]);
    expect(await h.engine.isStageDeferred(plain)).toBe(true);
  });
});
