import { noCapacity, type StageRef } from '../../../src';
import { harness, type Harness } from '../../helpers/engine';
import { keysUnder, waitFor } from '../../helpers/redis';
import { redisNow } from '../../helpers/observe';

/** A resource's line keeps nothing for a stage whose chain ended, even when that line never wakes again. */
const stage = (n: number): StageRef => ({ scope: ['book-l', `sc-${n}`], stage: 'image' });
const lineKey = (h: Harness, res: string) => `${h.prefix}:${h.queueName}:sd:wq:@${res}`;
const gateKey = (h: Harness, res: string) => `${h.prefix}:${h.queueName}:sd:gate:${res}`;

describe('C27: a resource line holds only stages that wait in it', () => {
  it('C27: a line whose stages were all cancelled keeps nothing once its gate lapsed', async () => {
    // (windows of 2 s: the stages are still deferred when cancelled, however slow the machine; the
    // gate and the line lapse 2 s after that)
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 2, capacityMaxSeconds: 2, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    await h.engine.dispatchStage(stage(2), {});
    expect(await h.redis.zcard(lineKey(h, 'gpu'))).toBe(3);
    for (const n of [0, 1, 2]) expect(await h.engine.cancelStage(stage(n))).toMatchObject({ hadDeferral: true });
    // nothing is deferred, in flight or held; the gate lapses by itself and nothing reads the line again
    await waitFor(async () => (await h.redis.exists(gateKey(h, 'gpu'))) === 0, 'the gate to lapse', 10_000);
    expect(await h.engine.listDeferred(['book-l'])).toEqual([]);
    await waitFor(async () => (await h.redis.exists(lineKey(h, 'gpu'))) === 0, 'the line to lapse', 10_000);
  });

  it('C27: a stage whose resource changed is gone from the old line once no deferral lives in it', async () => {
    let resource = 'gpu-a';
    const h = harness({
      resourceOf: () => resource,
      windows: { capacitySeconds: 0.5, capacityMaxSeconds: 1, jitter: 0 },
    });
    h.executor.script(stage(1), noCapacity());
    // the wake-up's id from the event, not from listDeferred: the 500 ms window may be over by the time we look
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    await h.engine.dispatchStage(stage(1), {});
    expect(await h.redis.zrange(lineKey(h, 'gpu-a'), '0', '-1')).toEqual(['book-l/sc-1/image']);
    // the pool is renamed; the stage's wake-up runs (an operator's Promote) and is sent
    resource = 'gpu-b';
    const sent: StageRef[] = [];
    h.engine.on('dispatched', (e) => sent.push(e.ref));
    // promoted before a worker runs: still delayed, however slow the machine
    await (await h.engine.queue.getJob(wakeUps[0]!))!.promote();
    const worker = h.engine.createWorker();
    try {
      await waitFor(() => sent.length === 1, 'the stage to be sent');
    } finally {
      await worker.close();
    }
    expect(await h.engine.listDeferred(['book-l'])).toEqual([]);
    // nothing wakes the old line again: it lapses with the last deferral that lived in it
    await waitFor(async () => (await h.redis.exists(lineKey(h, 'gpu-a'))) === 0, 'the old line to lapse', 5_000);
  });

  it('C27: a stage sent after its wake leaves its line at once, the others stay', async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    expect(await h.redis.zrange(lineKey(h, 'gpu'), '0', '-1')).toEqual(['book-l/sc-0/image', 'book-l/sc-1/image']);
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 })).woken).toEqual([stage(0)]);
    // woken, stage 0 keeps its place until it is sent; sent, its chain ended: it leaves the line
    expect(await h.redis.zrange(lineKey(h, 'gpu'), '0', '-1')).toEqual(['book-l/sc-0/image', 'book-l/sc-1/image']);
    expect(await h.engine.dispatchStage(stage(0), {})).toMatchObject({ dispatched: true });
    expect(await h.redis.zrange(lineKey(h, 'gpu'), '0', '-1')).toEqual(['book-l/sc-1/image']);
  });

  it('C27: a wake of a resource with nothing in its line leaves only keys that expire', async () => {
    const h = harness({ resourceOf: () => undefined });
    for (let i = 0; i < 20; i++) expect((await h.engine.wakeDeferred({ resource: `tenant-${i}` })).woken).toEqual([]);
    const left = (await keysUnder(h.redis, h.prefix)).filter((k) => k.includes(':sd:'));
    const ttls = await Promise.all(left.map((k) => h.redis.ttl(k)));
    // each resource's wake count (for attempts in flight) goes a day after its last wake
    expect(ttls.every((t) => t > 0 && t <= 86_400)).toBe(true);
  });
});

describe('C27: a gated deferral writes no more than a plain one', () => {
  it("C27: the line's TTL is set with as much again to spare, so the deferrals that follow within it leave it alone", async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 30, capacityMaxSeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    // the window (30 s) and the capacity maximum (60 s), twice: up to 180 s
    const first = await h.redis.pttl(lineKey(h, 'gpu'));
    expect(first).toBeGreaterThan(150_000);
    expect(first).toBeLessThanOrEqual(180_000);
    const now = await redisNow(h.redis);
    await waitFor(async () => (await redisNow(h.redis)) > now + 20, 'Redis time to move on 20 ms');
    // a gated deferral: its window ends with the gate's, within the TTL already set
    expect(await h.engine.dispatchStage(stage(1), {})).toMatchObject({ reason: 'gate_closed' });
    expect(await h.redis.zcard(lineKey(h, 'gpu'))).toBe(2);
    expect(await h.redis.pttl(lineKey(h, 'gpu'))).toBeLessThanOrEqual(first - 20);
  });
});
