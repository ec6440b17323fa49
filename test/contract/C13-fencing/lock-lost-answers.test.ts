import type { DispatchContext, ExecutorResult } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { latch, watch } from '../../helpers/jobs';
import { expireDispatchLockNow } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import { recording, untilAborted } from '../../helpers/attempts';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

/** A capacity and an idempotent chain of one deferral each: the next answer of that class reaches the bound. */
const boundAtOne = { maxCapacityDeferrals: 1, maxIdempotentDeferrals: 1 };

describe('C13: the answers of an attempt whose lock was lost', () => {
  it("a cancel, then close(), then a capacity answer saying retryable false: the first abort decides (the cancelled deferral's answer)", async () => {
    const gate = latch<void>();
    const { h, seen } = recording(async () => {
      await gate.opened;
      return notSent('no_worker_available', { retryable: false });
    });
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => seen.length === 1, 'the executor to start');
    await h.engine.cancelActiveDispatch(image);
    const closing = h.engine.close();
    gate.open();
    const r = await result;
    await closing;
    expect(r).toEqual({
      dispatched: false,
      reason: 'no_worker_available',
      retryable: true,
      cancelled: true,
      result: { dispatched: false, jobs: 0, reason: 'no_worker_available', retryable: true },
    });
  });

  it('a job interrupted by close() takes no licence: a direct send from another host meanwhile leaves it to run again', async () => {
    const { h: a, seen } = recording(async (_ref, ctx) => {
      await untilAborted(ctx).catch(() => undefined);
      return notSent('send_failed');
    });
    const added = await a.engine.enqueue(image, {});
    a.engine.createWorker();
    await waitFor(() => seen.length === 1, 'the executor to start');
    await a.engine.close();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    expect(await b.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
    // had the interrupted job held the stage, that send would have revoked it and removed the job
    expect(await b.engine.queue.getJobState(added.jobId!)).not.toBe('unknown');
  });

  const throwsAfterCancel: [string, (ctx: DispatchContext) => Promise<ExecutorResult<string>>, object, object][] = [
    [
      'executor',
      async (ctx) => {
        await untilAborted(ctx).catch(() => undefined);
        throw new Error('stopped: cancelled');
      },
      {},
      { dispatched: false, reason: 'executor_error', retryable: true, cancelled: true },
    ],
    [
      'rollback',
      async (ctx) => {
        await untilAborted(ctx).catch(() => undefined);
        return notSent('no_worker_available');
      },
      {
        rollback: async () => {
          throw new Error('rollback failed');
        },
      },
      {
        dispatched: false,
        reason: 'no_worker_available',
        retryable: true,
        cancelled: true,
        result: { dispatched: false, jobs: 0, reason: 'no_worker_available' },
      },
    ],
  ];
  it.each(throwsAfterCancel)(
    "a job's %s that throws after a cancel: the job completes with that attempt's answer",
    async (_hook, answer, overrides, expected) => {
      const { h, seen } = recording((_ref, ctx) => answer(ctx), overrides);
      await h.engine.enqueue(image, {});
      const { done, failed } = watch(h.engine.createWorker());
      await waitFor(() => seen.length === 1, 'the executor to start');
      await h.engine.cancelActiveDispatch(image);
      await waitFor(() => done.length + failed.length === 1, 'the job settled');
      expect(failed).toEqual([]);
      expect(done[0]!.result).toEqual(expected);
    },
  );

  it("a job's send while another host cancels the stage: the answer says cancelled (its release, awaited before BullMQ completes the job, finds the cancel)", async () => {
    const gate = latch<void>();
    const { h: a, seen } = recording(async () => {
      await gate.opened;
      return SENT;
    });
    // a second host of the same queue: its cancel reaches A's attempt only through Redis
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    await a.engine.enqueue(image, {});
    const { done } = watch(a.engine.createWorker());
    await waitFor(() => seen.length === 1, 'the executor to start');
    expect(await b.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
    gate.open();
    await waitFor(() => done.length === 1, 'the job completed');
    expect(done[0]!.result).toEqual({
      dispatched: true,
      reason: null,
      retryable: false,
      result: SENT,
      cancelled: true,
    });
  });

  it('a lock the renewal found lost, then the idempotent answer that reaches the bound: lock lost and retryable, not done', async () => {
    let second: DispatchContext | undefined;
    const { h, seen } = recording(
      async (_ref, ctx) => {
        if (seen.length === 2) {
          second = ctx;
          await untilAborted(ctx).catch(() => undefined);
        }
        return notSent('already_completed');
      },
      { lockMs: 1000, limits: boundAtOne },
    );
    const limits: unknown[] = [];
    h.engine.on('limit', (e) => limits.push(e));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    // the deferral ends by hand (its marker deleted); the chain stays on the wake-up's licence
    await h.redis.del(h.engine.deferredStageKey(image));
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => second !== undefined, 'the second executor to start');
    await expireDispatchLockNow(h.redis, h, image);
    const r = await result;
    expect((second!.signal.reason as Error).message).toBe('Dispatch lock lost');
    expect(r).toMatchObject({ dispatched: false, reason: 'dispatch_lock_lost', retryable: true });
    expect(r.completed).toBeUndefined();
    expect(limits).toEqual([]);
  });

  it.each([
    ['capacity', 'no_worker_available', 'limitReached'],
    ['idempotent', 'already_completed', 'completed'],
  ] as const)(
    'a cancel while the executor runs, then the %s answer (%s) that reaches the bound: cancelled, not %s',
    async (_cls, reason, flag) => {
      const gate = latch<void>();
      const { h, seen } = recording(
        async () => {
          if (seen.length === 2) await gate.opened;
          return notSent(reason);
        },
        { limits: boundAtOne },
      );
      const limits: unknown[] = [];
      h.engine.on('limit', (e) => limits.push(e));
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
      await h.redis.del(h.engine.deferredStageKey(image));
      const result = h.engine.dispatchStage(image, {});
      await waitFor(() => seen.length === 2, 'the second executor to start');
      await h.engine.cancelActiveDispatch(image);
      gate.open();
      const r = await result;
      expect(r).toMatchObject({ dispatched: false, reason, cancelled: true });
      expect(r[flag]).toBeUndefined();
      expect(limits).toEqual([]);
    },
  );
});
