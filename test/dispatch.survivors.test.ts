import type { DispatchContext, ExecutorResult, StageRef } from '../src';
import { stageId } from '../src';
import { DeferralStore } from '../src/deferral-store';
import { harness, notSent, SENT } from './helpers/engine';
import { fast, latch, watch } from './helpers/jobs';
import { keysUnder, waitFor } from './helpers/redis';

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
