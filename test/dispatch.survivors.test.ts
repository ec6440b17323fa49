import { UnrecoverableError } from 'bullmq';
import type { DispatchContext, ExecutorResult, StageRef } from '../src';
import { stageId } from '../src';
import { DeferralStore } from '../src/deferral-store';
import { harness, notSent, SENT } from './helpers/engine';
import { fast, fetchBy, latch, watch } from './helpers/jobs';
import { keysUnder, onCluster, waitFor } from './helpers/redis';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };
const text = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'text' };

/** An engine whose executor records each call's context and answers with `answer(ref, ctx)`. */
function recording(
  answer: (ref: StageRef, ctx: DispatchContext) => Promise<ExecutorResult>,
  overrides: Parameters<typeof harness>[0] = {},
) {
  const seen: { ref: StageRef; ctx: DispatchContext }[] = [];
  const h = harness({
    ...overrides,
    executor: (ref, _payload, ctx) => {
      seen.push({ ref, ctx });
      return answer(ref, ctx);
    },
  });
  const ctxOf = (ref: StageRef) => seen.find((s) => s.ref.stage === ref.stage)?.ctx;
  return { h, seen, ctxOf };
}

/** Rejects with the signal's reason once it aborts (an executor that stops when told). */
const untilAborted = (ctx: DispatchContext) =>
  new Promise<ExecutorResult>((_resolve, reject) => {
    if (ctx.signal.aborted) reject(ctx.signal.reason as Error);
    else ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
  });

describe('14.2: a cancel while the executor runs', () => {
  it('14.2: aborts the signal of that stage only, with an AbortError; the result says cancelled', async () => {
    const other = latch<void>();
    const { h, seen, ctxOf } = recording(async (ref, ctx) => {
      if (ref.stage === 'image') {
        // an executor that stops when told, and says it sent nothing
        await untilAborted(ctx).catch(() => undefined);
        return notSent('aborted');
      }
      await other.opened;
      return SENT;
    });
    const first = h.engine.dispatchStage(image, {});
    const second = h.engine.dispatchStage(text, {});
    await waitFor(() => seen.length === 2, 'both executors to start');
    const cancelled = await h.engine.cancelActiveDispatch(image);
    const firstResult = await first;
    // the other stage's executor goes on (read before it is let go, so a failed check cannot hold it)
    const otherAborted = ctxOf(text)!.signal.aborted;
    other.open();
    expect(await second).toMatchObject({ dispatched: true });
    expect(otherAborted).toBe(false);
    expect(cancelled).toMatchObject({ inFlight: true });
    expect(firstResult).toMatchObject({ dispatched: false, cancelled: true });
    const reason = ctxOf(image)!.signal.reason as Error;
    expect(reason).toBeInstanceOf(Error);
    expect(reason.name).toBe('AbortError');
    expect(reason.message).toBe('Dispatch cancelled');
  });
});

describe('14.2: the context an executor gets', () => {
  it('14.2: force is false unless the call asked for it', async () => {
    const { h, seen } = recording(async () => SENT);
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(text, {}, { force: true });
    expect(seen.map((s) => s.ctx.force)).toEqual([false, true]);
  });

  it('14.2: an attempt whose lock was taken as close() began gets an aborted signal', async () => {
    let closing: Promise<void> | undefined;
    // an executor that answers at once: not aborted, it would dispatch
    const { h, seen } = recording(async (_ref, ctx) => (ctx.signal.aborted ? untilAborted(ctx) : SENT), {
      faultHook: (point) => {
        if (point === 'lock-taken') closing = h.engine.close();
      },
    });
    const r = await h.engine.dispatchStage(image, {}).catch((e: unknown) => e);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.ctx.signal.aborted).toBe(true);
    expect(r).toMatchObject({ code: 'ENGINE_CLOSED' });
    await closing;
  });
});

describe('14.2: a job whose lock was lost while the executor ran, and that then threw', () => {
  it('14.2: tries again without spending an attempt (another attempt may have held the stage): then dispatches', async () => {
    let lost = false;
    const { h, seen } = recording(
      async () => {
        if (lost) return SENT;
        lost = true;
        const store = new DeferralStore(h.engine.queue);
        await h.redis.del(store.keys.lock(stageId(image)));
        throw new Error('the executor failed');
      },
      { retry: { attempts: 1, backoff: fast }, inFlightRetryMs: 20 },
    );
    await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length + failed.length > 0, 'the job settled');
    expect(failed).toHaveLength(0);
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(seen).toHaveLength(2);
  });
});

describe('14.2: a job whose real failure takes the stage from another job waiting out its retry', () => {
  it('14.2: the job it took the stage from no longer waits to run', async () => {
    const h = harness();
    h.executor.script(image, new Error('down'), new Error('down again'));
    const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };
    const opts = { attempts: 3, backoff: { type: 'fixed' as const, delay: 60_000 } };
    await h.engine.queue.add('image', data, { ...opts, jobId: 'first' });
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the first job failed once');
    await h.engine.queue.add('image', data, { ...opts, jobId: 'second' });
    await waitFor(() => failed.length === 2, 'the second job failed once');
    expect(await h.engine.queue.getJobState('second')).toBe('delayed');
    expect(['unknown', 'completed']).toContain(await h.engine.queue.getJobState('first'));
  });
});

describe('14.2: the lock of a running attempt', () => {
  it("14.2: a lock lost while the executor runs aborts its signal with an AbortError 'Dispatch lock lost'", async () => {
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

  it('14.2: an attempt that ended is no longer renewed: only running attempts are', async () => {
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

describe('14.2: a direct call that fails for real', () => {
  it('14.2: leaves no licence behind (only a job holds the stage while it waits out a retry); the next enqueue adds a job', async () => {
    const h = harness();
    h.executor.script(image, notSent('send_failed'));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ dispatched: false, reason: 'send_failed' });
    // what is left under the prefix: the fencing counter and BullMQ's queue meta, nothing of the stage
    const left = (await keysUnder(h.redis, h.prefix)).map((k) => k.slice(`${h.prefix}:${h.queueName}:`.length));
    expect(left.sort()).toEqual(['meta', 'sd:fence']);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });
});

describe('14.2: what dispatchStage answers, field by field (run N)', () => {
  /** Deletes the stage's lock while its executor runs (as a failover that lost it would). */
  const dropLock = (h: ReturnType<typeof harness>) =>
    h.redis.del(new DeferralStore(h.engine.queue).keys.lock(stageId(image)));

  /** A dispatch whose lock is deleted while its executor waits, which then answers `answer`. */
  async function answerAfterLockDrop(answer: ExecutorResult) {
    const gate = latch<void>();
    const { h, ctxOf } = recording(async () => {
      await gate.opened;
      return answer;
    });
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await dropLock(h);
    gate.open();
    return { h, result };
  }

  it('14.2: a sent stage: exactly dispatched, no reason, not retryable, the executor result, nothing else', async () => {
    const { h } = recording(async () => SENT);
    const times: number[] = [];
    h.engine.on('dispatched', (e) => times.push(e.executorMs));
    const t0 = performance.now();
    const r = await h.engine.dispatchStage(image, {});
    const took = performance.now() - t0;
    expect(r).toEqual({
      dispatched: true,
      reason: null,
      retryable: false,
      result: SENT,
    });
    // the executor's own time: never negative, within the call's
    expect(times[0]).toBeGreaterThanOrEqual(0);
    expect(times[0]).toBeLessThanOrEqual(took);
  });

  it("14.2: an executor that throws: the call rethrows it, the failed event says 'executor_error' with its time, no hookFailed", async () => {
    const { h } = recording(async () => {
      throw new Error('boom');
    });
    const failed: { reason: string; executorMs: number }[] = [];
    const hooks: unknown[] = [];
    h.engine.on('failed', (e) => failed.push(e));
    h.engine.on('hookFailed', (e) => hooks.push(e));
    const t0 = performance.now();
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('boom');
    const took = performance.now() - t0;
    expect(failed.map((f) => f.reason)).toEqual(['executor_error']);
    expect(failed[0]!.executorMs).toBeGreaterThanOrEqual(0);
    expect(failed[0]!.executorMs).toBeLessThanOrEqual(took);
    expect(hooks).toEqual([]);
  });

  it('14.2: a rollback that throws: the call rethrows it, with a hookFailed event for the rollback', async () => {
    const { h } = recording(async () => notSent('send_failed', { retryable: false }), {
      rollback: async () => {
        throw new Error('rollback broke');
      },
    });
    const hooks: { hook: string }[] = [];
    h.engine.on('hookFailed', (e) => hooks.push(e));
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('rollback broke');
    expect(hooks.map((e) => e.hook)).toEqual(['rollback']);
  });

  it('14.2: an outcome that is not deferrable and says nothing of retrying is retryable', async () => {
    const { h } = recording(async () => notSent('send_failed'));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'send_failed', retryable: true });
  });

  it('14.2: a lock lost while the executor runs, then a capacity answer: lock lost, retryable, nothing deferred', async () => {
    const { h, result } = await answerAfterLockDrop(notSent('no_worker_available'));
    expect(await result).toMatchObject({ dispatched: false, reason: 'dispatch_lock_lost', retryable: true });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('14.2: a lock lost while the executor runs, then a send: dispatched, flagged lockLost', async () => {
    const { result } = await answerAfterLockDrop(SENT);
    expect(await result).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT, lockLost: true });
  });

  it("14.2: an executor that answers the reason 'rollback_error' itself: no hookFailed (no hook failed)", async () => {
    const { h } = recording(async () => notSent('rollback_error'));
    const hooks: unknown[] = [];
    h.engine.on('hookFailed', (e) => hooks.push(e));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'rollback_error' });
    expect(hooks).toEqual([]);
  });

  it('14.2: a lock the renewal finds lost, then a capacity answer: lock lost, retryable, nothing deferred', async () => {
    const { h, ctxOf } = recording(
      async (_ref, ctx) => {
        await untilAborted(ctx).catch(() => undefined);
        return notSent('no_worker_available');
      },
      { lockMs: 1000 },
    );
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await dropLock(h);
    expect(await result).toMatchObject({ dispatched: false, reason: 'dispatch_lock_lost', retryable: true });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('14.2: a lock lost unseen, then an answer that is not deferrable: the release finds it lost', async () => {
    const { result } = await answerAfterLockDrop(notSent('send_failed', { retryable: false }));
    expect(await result).toMatchObject({ dispatched: false, reason: 'dispatch_lock_lost', retryable: true });
  });
});

describe('14.2: a job-driven send, and a close during the executor (run N)', () => {
  it("14.2: a job's send completes it with the exact answer", async () => {
    const { h } = recording(async () => SENT);
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the job completed');
    expect(done[0]!.result).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT });
  });

  it("14.2: a job's attempt cancelled while its executor runs, which then sends anyway: its answer says cancelled", async () => {
    const { h, ctxOf } = recording(async (_ref, ctx) => {
      await untilAborted(ctx).catch(() => undefined);
      return SENT;
    });
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await h.engine.cancelActiveDispatch(image);
    await waitFor(() => done.length === 1, 'the job completed');
    expect(done[0]!.result).toMatchObject({ dispatched: true, cancelled: true });
  });

  it('14.2: close() during the executor, then a capacity answer: interrupted, nothing deferred', async () => {
    const { h, ctxOf } = recording(async (_ref, ctx) => {
      await untilAborted(ctx).catch(() => undefined);
      return notSent('no_worker_available');
    });
    const marker = h.engine.deferredStageKey(image);
    const failed: unknown[] = [];
    h.engine.on('failed', (e) => failed.push(e));
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await h.engine.close();
    expect(await result).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
    expect(await h.redis.exists(marker)).toBe(0);
    // interrupted, not failed: no failed event
    expect(failed).toEqual([]);
  });
});

describe('14.2: when an abort counts: from the lock taken until the rollback ended', () => {
  it('14.2: a cancel that lands after the lock was taken, before the executor starts: the executor gets an aborted signal', async () => {
    const { h, ctxOf } = recording(async (_ref, ctx) => (ctx.signal.aborted ? notSent('aborted') : SENT), {
      faultHook: async (point) => {
        if (point === 'lock-taken') await h.engine.cancelActiveDispatch(image);
      },
    });
    const result = await h.engine.dispatchStage(image, {});
    expect(ctxOf(image)!.signal.aborted).toBe(true);
    expect((ctxOf(image)!.signal.reason as Error).message).toBe('Dispatch cancelled');
    expect(result).toMatchObject({ dispatched: false, cancelled: true });
  });

  it('14.2: close() after the rollback ended: the capacity answer is still recorded (the deferral stands)', async () => {
    let closing: Promise<void> | undefined;
    const { h, ctxOf } = recording(async () => notSent('no_worker_available'), {
      faultHook: (point) => {
        // not awaited: close() waits for this attempt
        if (point === 'rolled-back') closing = h.engine.close();
      },
    });
    const marker = h.engine.deferredStageKey(image);
    const result = await h.engine.dispatchStage(image, {});
    expect(ctxOf(image)!.signal.aborted).toBe(false);
    expect(result).toMatchObject({ dispatched: false, reason: 'no_worker_available', retryable: true });
    expect(result.until).toEqual(expect.any(Number));
    expect(await h.redis.exists(marker)).toBe(1);
    await closing;
  });
});

/** A capacity and an idempotent chain of one deferral each: the next answer of that class reaches the bound. */
const boundAtOne = { maxCapacityDeferrals: 1, maxIdempotentDeferrals: 1 };

describe('14.2: answers a hostile review (eighth session) showed unguarded', () => {
  it("14.2: a cancel, then close(), then a capacity answer saying retryable false: the first abort decides (the cancelled deferral's answer)", async () => {
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

  it('14.2: a job interrupted by close() takes no licence: a direct send from another host meanwhile leaves it to run again', async () => {
    const { h: a, seen } = recording(async (_ref, ctx) => {
      await untilAborted(ctx).catch(() => undefined);
      return notSent('send_failed');
    });
    const added = await a.engine.enqueue(image, {});
    a.engine.createWorker();
    await waitFor(() => seen.length === 1, 'the executor to start');
    await a.engine.close();
    const store = new DeferralStore(a.engine.queue);
    expect(await a.redis.zrange(store.keys.index, '0', '-1')).toEqual([]);
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    expect(await b.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
    expect(await a.redis.exists(store.keys.job(added.jobId!))).toBe(1);
  });

  const throwsAfterCancel: [string, (ctx: DispatchContext) => Promise<ExecutorResult>, object, object][] = [
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
    "14.2: a job's %s that throws after a cancel: the job completes with that attempt's answer",
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

  it("14.2: a job's send while another host cancels the stage (the lazy release): the answer has no cancelled flag, as docs/design.md says", async () => {
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
    expect(done[0]!.result).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT });
  });

  it('14.2: a lock the renewal found lost, then the idempotent answer that reaches the bound: lock lost and retryable, not done', async () => {
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
    await h.redis.del(new DeferralStore(h.engine.queue).keys.lock(stageId(image)));
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
    '14.2: a cancel while the executor runs, then the %s answer (%s) that reaches the bound: cancelled, not %s',
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

  it("14.2: a licence marked '!' whose job id was reused by another stage's job: the stage's chain still starts fresh", async () => {
    const s = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 's' };
    const t = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 't' };
    const h = harness({ limits: { maxCapacityDeferrals: 120, maxIdempotentDeferrals: 1 } });
    const store = new DeferralStore(h.engine.queue);
    const q = h.engine.queue;
    const data = (ref: StageRef) => ({ v: 1, scope: ref.scope, stage: ref.stage, payload: {} });
    const opts = { attempts: 3, backoff: { type: 'fixed' as const, delay: 60_000 } };
    h.executor.script(s, new UnrecoverableError('broken'), new Error('down again'), notSent('already_completed'));
    h.executor.script(t, notSent('already_completed'), new Error('t down'));
    // job X of stage s fails for good; an operator retries it; it fails again and waits out its backoff
    await q.add('s', data(s), { ...opts, jobId: 'X' });
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'X failed for good');
    await (await q.getJob('X'))!.retry('failed');
    await waitFor(() => failed.length === 2, 'X failed again after the retry by hand');
    const sid = stageId(s);
    expect(await h.redis.zrange(store.keys.index, '0', '-1')).toEqual([`${sid}@j.X!`]);
    // the operator removes X: the licence stays
    await q.remove('X');
    // stage t: one idempotent deferral, ended by hand; then a job with the reused id X fails under t's licence
    expect(await h.engine.dispatchStage(t, {})).toMatchObject({ until: expect.any(Number) });
    await h.redis.del(h.engine.deferredStageKey(t));
    await q.add('t', data(t), { ...opts, jobId: 'X' });
    await waitFor(() => failed.length === 3, 'X (of stage t) failed once');
    expect(await h.redis.hget(store.keys.job('X'), 'sdk')).toBe('0.1.0');
    // stage s, under its '!' licence: a fresh chain, so its first idempotent answer is a deferral
    const r = await h.engine.dispatchStage(s, {});
    expect(r).toMatchObject({
      dispatched: false,
      reason: 'already_completed',
      retryable: true,
      until: expect.any(Number),
    });
    expect(r.completed).toBeUndefined();
  });
});

describe('14.2: the deferral, run B (lines 370-502)', () => {
  it('14.2: a deferral answers exactly: not dispatched, its reason, retryable, the result marked retryable, until; no journalFailed', async () => {
    const { h } = recording(async () => notSent('no_worker_available'));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toEqual({
      dispatched: false,
      reason: 'no_worker_available',
      retryable: true,
      result: { dispatched: false, jobs: 0, reason: 'no_worker_available', retryable: true },
      until: expect.any(Number),
    });
  });

  it("11.1: a new chain's first capacity deferral restarts its stage's wait, even where a wait outlived the old chain", async () => {
    const { h } = recording(async () => notSent('no_worker_available'));
    /** Waits until Redis' clock has moved past the last millisecond seen: the wait starts below differ. */
    let seen = 0;
    const tick = () =>
      waitFor(async () => {
        const [s, us] = await h.redis.time();
        const ms = Number(s) * 1000 + Math.floor(Number(us) / 1000);
        const later = ms > seen;
        seen = ms;
        return later;
      }, "Redis' clock to move on");
    const a = { scope: ['book-14', 'a'], stage: 'image' };
    const b = { scope: ['book-14', 'b'], stage: 'image' };
    // a's chain begins (its wait starts), then an operator removes its wake-up in Bull Board and
    // ends the deferral by hand; the next enqueue drops the licence of the job that is gone, but
    // the wait a's old chain started is still there
    const first = await h.engine.dispatchStage(a, {});
    const [listed] = await h.engine.listDeferred(['book-14', 'a']);
    await h.engine.queue.remove(listed!.wakeUpJobId);
    await h.redis.del(h.engine.deferredStageKey(a));
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: true });
    expect(first.until).toEqual(expect.any(Number));
    await tick();
    // b's chain begins after a's old one, before a's new one
    await h.engine.dispatchStage(b, {});
    await tick();
    await tick();
    const again = await h.engine.dispatchStage(a, {});
    expect((await h.engine.listDeferred(['book-14', 'a']))[0]).toMatchObject({ deferrals: 1 });
    expect(again.until).toEqual(expect.any(Number));
    // longest-waiting first: b, whose chain began before a's new one
    expect((await h.engine.wakeDeferred({ limit: 1 })).woken).toEqual([b]);
  });
});

(onCluster ? describe.skip : describe)('14.2: a worker that stalled while its job deferred (run B8’s gap)', () => {
  it('14.2: does not remove its own job (the licence it revoked), which BullMQ handed back to wait: the job runs again and dispatches nothing', async () => {
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
