import { notSent, SENT } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { recording, untilAborted } from '../../helpers/attempts';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };
const text = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'text' };

describe('C9: a cancel while the executor runs', () => {
  it('aborts the signal of that stage only, with an AbortError; the result says cancelled', async () => {
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

describe('C9: the context an executor gets', () => {
  it('force is false unless the call asked for it', async () => {
    const { h, seen } = recording(async () => SENT);
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(text, {}, { force: true });
    expect(seen.map((s) => s.ctx.force)).toEqual([false, true]);
  });

  it('an attempt whose lock was taken as close() began gets an aborted signal', async () => {
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

describe('C9: when an abort counts: from the lock taken until the rollback ended', () => {
  it('a cancel that lands after the lock was taken, before the executor starts: the executor gets an aborted signal', async () => {
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

  it('close() after the rollback ended: the capacity answer is still recorded (the deferral stands)', async () => {
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
