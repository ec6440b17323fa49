import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { DeferralStore } from '../../../src/deferral-store';
import type { StageRef } from '../../../src';
import { watch } from '../../helpers/members';
import { FREE, holdsOn, stageView } from '../../helpers/observe';

/**
 * Found: the processor released a failed attempt's lock
 * and only later, in a second round trip, installed the job as the stage's
 * licence, so a host's tick in between could be revoked by it. The job now
 * takes the licence in the release itself (one script, while it holds the
 * lock). These tests run the host's tick right after that release, before
 * BullMQ has even moved the job to its backoff: the tick must win cleanly.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** Runs `tick` once, right after a failed attempt's release (which makes the job the licence holder). */
function tickBeforeHold(tick: () => Promise<unknown>) {
  const real = DeferralStore.prototype.release;
  let ran = false;
  jest.spyOn(DeferralStore.prototype, 'release').mockImplementation(async function (
    this: DeferralStore,
    ...args: Parameters<DeferralStore['release']>
  ) {
    const out = await real.apply(this, args);
    if (!ran && args[3] === 'hold') {
      ran = true;
      await tick();
    }
    return out;
  });
}

describe('C12: HOLD after the release races a host tick', () => {
  it('a deferral recorded in between keeps its wake-up: the stage comes back after the window', async () => {
    const h = harness({
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 200 } },
      windows: { capacitySeconds: 1, jitter: 0 },
    });
    // the enqueued job fails (real failure), the host's tick in between finds no capacity, then all is well
    h.executor.script(image, new Error('down'), notSent('no_worker_available'), SENT);
    tickBeforeHold(() => h.engine.dispatchStage(image, {}));
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length >= 1, 'the enqueued job ran again after its backoff');
    // after the window (1 s) the wake-up must carry the stage back: 3 calls, nothing deferred or queued
    const settled = async () => {
      const counts = await h.engine.queue.getJobCounts('active', 'wait', 'delayed');
      return {
        calls: h.executor.calls.length,
        deferred: await h.engine.isStageDeferred(image),
        pendingJobs: (counts.active ?? 0) + (counts.wait ?? 0) + (counts.delayed ?? 0),
      };
    };
    const want = { calls: 3, deferred: false, pendingJobs: 0 };
    await waitFor(async () => JSON.stringify(await settled()) === JSON.stringify(want), 'the wake-up dispatched');
    expect(await settled()).toEqual(want);
  });

  it('a success in between: the failed job does not dispatch the stage a second time', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 200 } } });
    h.executor.script(image, new Error('down'), SENT, SENT);
    tickBeforeHold(async () => expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true));
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length >= 1, 'the enqueued job ran again after its backoff');
    // "dispatched: true — done; nothing of the stage is left": one send, not two
    expect(h.executor.calls.filter((c) => c.ref.stage === 'image')).toHaveLength(2);
  });

  it('a cancel in between: the cancelled stage is free, and a job enqueued afterwards dispatches it', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 200 } } });
    h.executor.script(image, new Error('down'), SENT);
    tickBeforeHold(() => h.engine.cancelActiveDispatch(image));
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length >= 1, 'the job ran again and stopped as cancelled');
    expect(done[0]!.result).toMatchObject({ cancelled: true });
    expect(h.executor.callsFor(image)).toBe(1);
    // memory no user sees (no public view shows a hold left on a free stage): none is kept
    expect(await holdsOn(h.redis, h, image)).toEqual([]);
    // nothing holds the stage any more: not deferred, no job of it left, and a new job sends it
    expect(await stageView(h.engine, image)).toEqual(FREE);
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    await waitFor(() => done.length >= 2, 'the new job ran');
    expect(done[1]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(image)).toBe(2);
  });
});
