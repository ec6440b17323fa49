import type { DispatchContext, ExecutorResult, StageRef } from '../src';
import { stageId } from '../src';
import { DeferralStore } from '../src/deferral-store';
import { harness, notSent, SENT } from './helpers/engine';
import { fast, latch, watch } from './helpers/jobs';
import { waitFor } from './helpers/redis';

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
    expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
    expect(await first).toMatchObject({ dispatched: false, cancelled: true });
    const reason = ctxOf(image)!.signal.reason as Error;
    expect(reason).toBeInstanceOf(Error);
    expect(reason.name).toBe('AbortError');
    // the other stage's executor goes on
    expect(ctxOf(text)!.signal.aborted).toBe(false);
    other.open();
    expect(await second).toMatchObject({ dispatched: true });
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
