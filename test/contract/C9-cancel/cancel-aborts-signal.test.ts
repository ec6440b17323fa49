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

describe('C9: a cancel that lands after the lock was taken', () => {
  it('before the executor starts: the executor gets an aborted signal, the result says cancelled', async () => {
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
});
