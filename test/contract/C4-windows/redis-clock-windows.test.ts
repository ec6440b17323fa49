import { stageId, type StageRef } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C4: the window is decided by Redis' clock", () => {
  it('a deferral made on a host 5 s behind: the wake-up is due and the marker expires at Redis time + window', async () => {
    const h = harness({ windows: { capacitySeconds: 3, jitter: 0 } });
    const real = Date.now.bind(Date);
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.isStageDeferred(image); // connect first, with the true clock
    // Redis' time (and this host's, unmocked) before and after the deferral: the bounds below allow
    // for the time the test itself took, not a fixed 500 ms of it
    const redisTime = async () => {
      const [s, us] = await h.redis.time();
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    const redisBefore = await redisTime();
    const started = performance.now();
    jest.spyOn(Date, 'now').mockImplementation(() => real() - 5000);
    await h.engine.dispatchStage(image, {});
    jest.restoreAllMocks();
    const redisAfter = await redisTime();
    const [d] = await h.engine.listDeferred();
    const score = Number(await h.redis.zscore(`${h.prefix}:${h.queueName}:delayed`, d!.wakeUpJobId));
    const due = Math.floor(score / 0x1000);
    expect(due - redisBefore).toBeGreaterThan(2500);
    expect(due - redisAfter).toBeLessThanOrEqual(3000);
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(image));
    expect(pttl).toBeGreaterThan(2500 - (performance.now() - started));
  });

  it('a wake-up started early by a worker clock ahead of Redis waits out the rest (delayed, no attempt spent)', async () => {
    // 3 s: still open when the test begins the wake-up, however slow the machine, and within the 5 s tolerance
    const h = harness({ windows: { capacitySeconds: 3, jitter: 0 }, maxClockSkewMs: 5000 });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    const [d] = await h.engine.listDeferred();
    const store = new DeferralStore(h.engine.queue);
    const early = await store.begin({
      sid: stageId(image),
      ownJobId: d!.wakeUpJobId,
      lockMs: 30_000,
      wakeUp: true,
      skewToleranceMs: 5000,
    });
    expect(early.kind).toBe('early');
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });

  it("an operator's Promote (Bull Board) wakes the stage now", async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    const [d] = await h.engine.listDeferred();
    const { done } = watch(h.engine.createWorker());
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.promote();
    await waitFor(() => done.length === 1, 'the promoted wake-up ran');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });
});
