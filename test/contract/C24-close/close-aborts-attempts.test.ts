import type { ExecutorResult } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { recording, untilAborted } from '../../helpers/attempts';

const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

describe('C24: close() aborts the attempts it finds running; a rollback that ended stands', () => {
  it('close() aborts the signal of a running executor, with ENGINE_CLOSED', async () => {
    let seen: AbortSignal | undefined;
    const h = harness({
      executor: async (_ref, _payload, ctx) => {
        seen = ctx.signal;
        // answers only when aborted (close() waits for running executors)
        return new Promise<ExecutorResult<string>>((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error)),
        );
      },
    });
    const dispatched = h.engine.dispatchStage(image, {}).catch((e: unknown) => e);
    await waitFor(() => seen !== undefined, 'the executor to start');
    expect(seen!.aborted).toBe(false);
    await h.engine.close();
    expect(seen!.aborted).toBe(true);
    expect(seen!.reason).toMatchObject({ code: 'ENGINE_CLOSED' });
    expect(await dispatched).toMatchObject({ code: 'ENGINE_CLOSED' });
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
