import type { StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';
import { harness, notSent } from '../../helpers/engine';
import { fetchBy, holdPromotion, stalledCheck, watch } from '../../helpers/jobs';
import { client, waitFor } from '../../helpers/redis';

/**
 * A wake-up the clear promoted runs (defers again, succeeds, dies) while the clear call is still
 * under way (its promotion held). The clear ended the deferral before promoting: the run holds a
 * fresh chain, and the clear counts the deferral once.
 */
const a: StageRef = { scope: ['r39-ends', 'ch-1'], stage: 'image' };

/** The engine, one capacity deferral of `a` made, and the clear's promotion held once it ran. */
async function deferredAndHeld(again: 'defers' | 'succeeds', capacityLimit?: number) {
  const h = harness({
    windows: { capacitySeconds: 300, jitter: 0 },
    ...(capacityLimit ? { limits: { maxCapacityDeferrals: capacityLimit } } : {}),
  });
  // the first call defers; the promoted wake-up's run then defers again, or succeeds (the fallback)
  h.executor.script(a, notSent('no_worker_available'));
  if (again === 'defers') h.executor.script(a, notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
  const [d] = await h.engine.listDeferred(a.scope);
  expect(d!.deferrals).toBe(1);
  const wakeUp = d!.wakeUpJobId;
  return { h, wakeUp, ...holdPromotion(h.engine.queue, wakeUp) };
}

it('C10: a promoted wake-up whose run defers again while the clear is under way is counted once, and its new deferral starts a fresh chain', async () => {
  const { h, wakeUp, go, restore } = await deferredAndHeld('defers');
  const worker = h.engine.createWorker();
  const { done } = watch(worker);
  try {
    const clearing = h.engine.clearDeferrals(['r39-ends']);
    await waitFor(() => done.some((c) => c.id === wakeUp), 'the promoted wake-up to run and defer again');
    const [d] = await h.engine.listDeferred(a.scope);
    expect(d!.wakeUpJobId).not.toBe(wakeUp);
    go.open();
    expect(await clearing).toBe(1);
    // the chain the clear ended does not go on: this is the first deferral of a new one
    const [after] = await h.engine.listDeferred(a.scope);
    expect(after).toMatchObject({ wakeUpJobId: d!.wakeUpJobId, deferrals: 1 });
    expect(after!.wakeUpJobId).toMatch(/@cap\.1\.0\.0\./);
    expect(h.executor.callsFor(a)).toBe(2);
  } finally {
    restore();
    await worker.close();
  }
});

it('C10: a promoted wake-up whose run succeeds while the clear is under way is counted once, and the stage is sent once', async () => {
  const { h, wakeUp, go, restore } = await deferredAndHeld('succeeds');
  const worker = h.engine.createWorker();
  const { done } = watch(worker);
  try {
    const clearing = h.engine.clearDeferrals(['r39-ends']);
    await waitFor(() => done.some((c) => c.id === wakeUp), 'the promoted wake-up to run and succeed');
    expect(done.find((c) => c.id === wakeUp)!.result).toMatchObject({ dispatched: true });
    go.open();
    expect(await clearing).toBe(1);
    expect(h.executor.callsOf(a).filter((c) => c.result?.dispatched)).toHaveLength(1);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
  } finally {
    restore();
    await worker.close();
  }
});

it('C10: at the capacity bound, a promoted wake-up whose run defers again while the clear is under way starts a fresh chain instead of failing at the bound', async () => {
  // the bound: the second capacity deferral in a row fails the stage for good; the clear's fresh
  // chain makes the promoted run's deferral the first of a new chain instead
  const { h, wakeUp, go, restore } = await deferredAndHeld('defers', 2);
  const worker = h.engine.createWorker();
  const { done, failed } = watch(worker);
  try {
    const clearing = h.engine.clearDeferrals(['r39-ends']);
    await waitFor(() => done.some((c) => c.id === wakeUp), 'the promoted wake-up to run and defer again');
    go.open();
    expect(await clearing).toBe(1);
    expect(failed).toHaveLength(0);
    const [after] = await h.engine.listDeferred(a.scope);
    expect(after).toMatchObject({ deferrals: 1 });
  } finally {
    restore();
    await worker.close();
  }
});

it('C10: a promoted run whose worker dies before its executor, while the clear is under way: the redelivered wake-up runs on the fresh chain and sends the stage; counted once', async () => {
  let frozen!: () => void;
  const freeze = new Promise<void>((r) => (frozen = r));
  let taken = 0;
  const { h, wakeUp, go, restore } = await deferredAndHeld('succeeds');
  // the host whose worker runs the promoted wake-up first, and freezes after its begin
  const dead = harness(
    {
      lockMs: 1000,
      faultHook: async (point) => {
        if (point === 'lock-taken' && ++taken === 1) await freeze;
      },
    },
    h,
  );
  const redis = client();
  const J = `${h.prefix}:${h.queueName}:${wakeUp}`;
  try {
    const clearing = h.engine.clearDeferrals(['r39-ends']);
    await waitFor(
      async () => (await h.engine.queue.getJobState(wakeUp)) === 'waiting',
      'the clear to promote the wake-up',
    );
    const run1 = await fetchBy(h, 'tok-1');
    void dead.engine.processor(run1, 'tok-1').catch(() => undefined);
    await waitFor(() => taken === 1, 'the promoted run to begin');
    // that host dies (no more lock renewals): BullMQ's stalled check hands the job on
    (await redisClient(dead.engine.queue)).disconnect();
    await redis.del(`${J}:lock`);
    await stalledCheck(h, redis, J, 0);
    await waitFor(
      async () => (await redis.exists(`${h.prefix}:${h.queueName}:sd:inflight:r39-ends/ch-1/image`)) === 0,
      "the dead run's stage lock to expire (lockMs)",
      10_000,
    );
    const run2 = await fetchBy(h, 'tok-2');
    expect(await h.engine.processor(run2, 'tok-2')).toMatchObject({ dispatched: true });
    expect(h.executor.callsOf(a).filter((c) => c.result?.dispatched)).toHaveLength(1);
    go.open();
    expect(await clearing).toBe(1);
  } finally {
    restore();
    frozen();
  }
}, 30_000);

it("C10: a promoted run that defers again while the clear is under way starts its place in the wait index afresh: wakeDeferred's longest-waiting-first wakes a stage deferred before it", async () => {
  const { h, wakeUp, go, restore } = await deferredAndHeld('defers');
  // b: deferred after a's first deferral, before the clear, outside the cleared scope
  const b: StageRef = { scope: ['r39-ends-other', 'ch-1'], stage: 'image' };
  h.executor.script(b, notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(b, {})).toMatchObject({ reason: 'no_worker_available' });
  const worker = h.engine.createWorker();
  const { done } = watch(worker);
  try {
    const clearing = h.engine.clearDeferrals(['r39-ends']);
    await waitFor(() => done.some((c) => c.id === wakeUp), 'the promoted wake-up to run and defer again');
    go.open();
    expect(await clearing).toBe(1);
    const { woken } = await h.engine.wakeDeferred({ stage: 'image', limit: 1 });
    expect(woken).toEqual([b]);
  } finally {
    restore();
    await worker.close();
  }
});
