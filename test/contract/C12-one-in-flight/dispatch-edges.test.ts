import type { StageRef } from '../../../src';
import { stageId } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { harness, notSent, SENT } from '../../helpers/engine';
import { fetchBy, latch, watch } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';
import { recording, untilAborted } from '../../helpers/attempts';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };
const text = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'text' };

describe('C12: the lock of a running attempt', () => {
  it("a lock lost while the executor runs aborts its signal with an AbortError 'Dispatch lock lost'", async () => {
    const { h, ctxOf } = recording(async (_ref, ctx) => untilAborted(ctx).catch(() => notSent('aborted')), {
      lockMs: 1000,
    });
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    // the lock goes (as after a failover that lost it): the next renewal finds it gone
    await h.redis.del(new DeferralStore(h.engine.queue).keys.lock(stageId(image)));
    await result;
    const reason = ctxOf(image)!.signal.reason as Error;
    expect(reason.name).toBe('AbortError');
    expect(reason.message).toBe('Dispatch lock lost');
  });

  it('an attempt that ended is no longer renewed: only running attempts are', async () => {
    const extended: string[] = [];
    const original = DeferralStore.prototype.extend;
    const spy = jest.spyOn(DeferralStore.prototype, 'extend').mockImplementation(function (
      this: DeferralStore,
      ...args: Parameters<DeferralStore['extend']>
    ) {
      extended.push(args[0]);
      return original.apply(this, args);
    });
    try {
      const renewals = (ref: StageRef) => extended.filter((sid) => sid === stageId(ref)).length;
      const { h } = recording(
        async (ref) => {
          // the second stage's executor runs until its lock has been renewed twice
          if (ref.stage === 'text') await waitFor(() => renewals(text) >= 2, 'two renewals of the running attempt');
          return SENT;
        },
        { lockMs: 1000 },
      );
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      const from = extended.length;
      expect(await h.engine.dispatchStage(text, {})).toMatchObject({ dispatched: true });
      expect(renewals(text)).toBeGreaterThanOrEqual(2);
      expect(extended.slice(from)).not.toContain(stageId(image));
    } finally {
      spy.mockRestore();
    }
  });
});

(onCluster ? describe.skip : describe)('C12: a worker that stalled while its job deferred (run B8’s gap)', () => {
  it('does not remove its own job (the licence it revoked), which BullMQ handed back to wait: the job runs again and dispatches nothing', async () => {
    const held = latch<void>();
    let calls = 0;
    const h = harness({
      windows: { capacitySeconds: 60, jitter: 0 },
      executor: async () => {
        calls += 1;
        if (calls === 2) await held.opened;
        return notSent('no_worker_available');
      },
    });
    // a deferral; its wake-up is woken (due now): it holds the stage's licence
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    expect((await h.engine.wakeDeferred({})).woken).toHaveLength(1);
    const job = await fetchBy(h, 'bull-1');
    const id = job.id as string;
    const a = (h.engine.processor(job, 'bull-1') as Promise<unknown>).catch((e: unknown) => e);
    await waitFor(() => calls === 2, 'the wake-up’s executor to start');
    // the worker freezes past BullMQ's lockDuration: its lock of the job lapses, the stalled
    // check moves the job back to wait (as BullMQ's moveStalledJobsToWait does)
    const base = `${h.prefix}:${h.queueName}:`;
    await h.redis.del(`${base}${id}:lock`);
    await h.redis.lrem(`${base}active`, 0, id);
    await h.redis.lpush(`${base}wait`, id);
    // it wakes: its capacity answer is recorded (its stage lock, tied to the unfinished job, lives
    // on), which revokes the licence the job held: its own
    held.open();
    expect(await a).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    // the job itself is still there, handed back to wait; run again, it dispatches nothing
    expect(await h.engine.queue.getJobState(id)).toBe('waiting');
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.some((d) => d.id === id), 'the redelivered job ran');
    expect(done.find((d) => d.id === id)!.result).toMatchObject({ dispatched: false });
    expect(calls).toBe(2);
  });
});
