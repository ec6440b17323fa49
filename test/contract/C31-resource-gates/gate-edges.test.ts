import { noCapacity, type StageRef } from '../../../src';
import { stageId } from '../../../src/stage-ref';
import { harness, SENT, type Harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { redisNow } from '../../helpers/observe';

/**
 * Paths around a closed gate that the other C31 files do not walk: a wake that is not the
 * resource's landing while a gated attempt is being recorded, and a probe that outlives the
 * gate key's own expiry.
 */
const stage = (n: number): StageRef => ({ scope: ['book-e', `sc-${n}`], stage: 'image' });
const gateKey = (h: Harness) => `${h.prefix}:${h.queueName}:sd:gate:gpu`;

describe('C31: a wake that does not open the gate leaves a gated attempt gated', () => {
  it.each([
    ['a plain wakeDeferred()', (h: Harness) => h.engine.wakeDeferred({ limit: 10 })],
    ['a wakeDeferred of an unrelated scope', (h: Harness) => h.engine.wakeDeferred({ scope: ['other-book'] })],
    ['a wakeDeferred of the stage kind', (h: Harness) => h.engine.wakeDeferred({ stage: 'image' })],
  ])('%s landing between a gated begin and its deferral calls no executor', async (_what, wake) => {
    let once = true;
    // the gate as the wake left it, and Redis' time then
    let closedUntil = 0;
    let wokenAt = Infinity;
    const h: Harness = harness({
      resourceOf: () => 'gpu',
      windows: { capacitySeconds: 60, jitter: 0 },
      faultHook: async (point, ref) => {
        if (point === 'lock-taken' && ref.scope[1] === 'sc-5' && once) {
          once = false;
          await wake(h);
          closedUntil = Number(await h.redis.get(gateKey(h)));
          wokenAt = await redisNow(h.redis);
        }
      },
    });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    const r = await h.engine.dispatchStage(stage(5), {});
    // the gate was still closed after the wake (none of these wakes reads or opens it)
    expect(closedUntil).toBeGreaterThan(wokenAt);
    expect(h.executor.callsFor(stage(5))).toBe(0);
    expect(r).toMatchObject({ dispatched: false, reason: 'gate_closed' });
  });
});

describe('C31: one probe per window, while the probe runs', () => {
  it('C31: a probe still within its lease keeps the others gated past the gate window’s own TTL', async () => {
    // lockMs is the default 30 s; the gate key lives for its window plus capacityMaxSeconds (1.2 s)
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 0.2, capacityMaxSeconds: 1, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await waitFor(async () => {
      const g = await h.redis.get(gateKey(h));
      return g !== null && Number(g) <= (await redisNow(h.redis));
    }, 'the gate window to end');
    let answer!: () => void;
    h.executor.script(stage(1), () => new Promise((resolve) => (answer = () => resolve(SENT))));
    const probe = h.engine.dispatchStage(stage(1), {});
    await waitFor(() => h.executor.callsFor(stage(1)) === 1, 'the probe to run');
    expect((await h.redis.get(gateKey(h)))?.startsWith('p')).toBe(true);
    // the probe runs on, well within its 30 s lease: the gate key lives as long (its own TTL was
    // the window plus capacityMaxSeconds, 1.2 s), so no second probe starts under it
    expect(await h.redis.pttl(gateKey(h))).toBeGreaterThan(20_000);
    try {
      const r = await h.engine.dispatchStage(stage(2), {});
      expect(h.executor.callsFor(stage(2))).toBe(0);
      expect(r).toMatchObject({ reason: 'gate_closed' });
    } finally {
      answer();
      await probe;
    }
  });
});

describe('C31: a removed wake-up at the head of the line', () => {
  it('C31: is skipped: the wake goes to the next stage waiting', async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    await h.engine.dispatchStage(stage(2), {});
    const [head] = await h.engine.listDeferred(['book-e', 'sc-0']);
    await (await h.engine.queue.getJob(head!.wakeUpJobId))!.remove();
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 })).woken).toEqual([stage(1)]);
    // and the stage whose wake-up was removed dispatches at once (C17)
    expect(await h.engine.dispatchStage(stage(0), {})).toMatchObject({ dispatched: true });
  });
});

describe('C31: the stage whose answer closed the gate', () => {
  it('is its probe when its wake-up runs a few ms early, as a worker whose clock runs that far ahead runs it', async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    const [parked] = await h.engine.listDeferred(['book-e', 'sc-0']);
    const deferred: { reason: string }[] = [];
    h.engine.on('deferred', (e) => deferred.push(e));
    const wakeUp = (await h.engine.queue.getJob(parked!.wakeUpJobId))!;
    const worker = h.engine.createWorker();
    await worker.waitUntilReady();
    try {
      // the window (the stage's and the gate's, one instant) ends 20 ms from now by Redis' clock:
      // the wake-up runs before that, within the 20 ms a run counts as on time
      await h.redis.eval(
        "local t = redis.call('TIME'); local now = t[1] * 1000 + math.floor(t[2] / 1000); " +
          "redis.call('PEXPIRE', KEYS[1], 20); redis.call('SET', KEYS[2], now + 19, 'KEEPTTL')",
        2,
        `${h.prefix}:${h.queueName}:sd:deferred:${stageId(stage(0))}`,
        gateKey(h),
      );
      await wakeUp.promote();
      await waitFor(() => h.executor.callsFor(stage(0)) === 2 || deferred.length > 0, 'the wake-up to run');
      expect({ probed: h.executor.callsFor(stage(0)), parked: deferred.map((d) => d.reason) }).toEqual({
        probed: 2,
        parked: [],
      });
    } finally {
      await worker.close();
    }
  });
});

describe('C31: a chain that waited in its kind’s index, then deferred by an answer naming a resource', () => {
  /**
   * Stage 1's chain: a plain capacity deferral, then stage 3 waits in gpu's line, then stage 1's
   * wake-up (run by a worker) answers `second`; then stage 2 waits in the kind's index.
   */
  async function moved(h: Harness, second: ReturnType<typeof noCapacity>): Promise<void> {
    h.executor.script(stage(1), noCapacity(), second);
    await h.engine.dispatchStage(stage(1), {});
    h.executor.script(stage(3), noCapacity({ resource: 'gpu' }));
    await h.engine.dispatchStage(stage(3), {});
    const deferred: unknown[] = [];
    h.engine.on('deferred', (e) => deferred.push(e));
    const worker = h.engine.createWorker();
    try {
      const [first] = await h.engine.listDeferred(['book-e', 'sc-1']);
      await (await h.engine.queue.getJob(first!.wakeUpJobId))!.promote();
      await waitFor(() => deferred.length === 1, 'the deferral naming gpu');
    } finally {
      await worker.close();
    }
    h.executor.script(stage(2), noCapacity());
    await h.engine.dispatchStage(stage(2), {});
  }

  it('waits in that resource’s line only: a plain wakeDeferred wakes a stage of its kind that can run', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    await moved(h, noCapacity({ resource: 'gpu' }));
    expect((await h.engine.wakeDeferred({ limit: 1 })).woken).toEqual([stage(2)]);
    // its chain keeps its start: older than stage 3's, it wakes first
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 })).woken).toEqual([stage(1)]);
  });

  it('with a hint, waits in no line: a plain wakeDeferred leaves it asleep', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    await moved(h, noCapacity({ resource: 'gpu', retryAfterMs: 60_000 }));
    expect((await h.engine.wakeDeferred({ limit: 5 })).woken).toEqual([stage(2)]);
  });
});
