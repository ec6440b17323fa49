import { stageId, type ExecutorResult } from '../../../src';
import { harness, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

function gate<T>(): { promise: Promise<T>; open: (v: T) => void } {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

describe('C12: the in-flight lock is renewed while the executor runs', () => {
  it('lock renewal: with lockMs 1000 the lock outlives 2.5 s of executor, and a second dispatch meanwhile is in flight', async () => {
    const latch = gate<void>();
    let signal: AbortSignal | undefined;
    let calls = 0;
    const h = harness({
      lockMs: 1000,
      executor: async (_ref, _payload, ctx) => {
        calls += 1;
        signal = ctx.signal;
        await latch.promise;
        return SENT;
      },
    });
    const lockKey = `${h.prefix}:${h.queueName}:sd:inflight:${stageId(image)}`;
    const first = h.engine.dispatchStage(image, {});
    await waitFor(() => signal !== undefined, 'the executor to start');
    const takenAt = Date.now();
    // Poll the lock's PTTL: it must never be missing, and must go up (renewed) again and again,
    // until it has been held for 2.5 lock lifetimes. Only then is the executor released.
    let last = Infinity;
    let renewals = 0;
    let missing = 0;
    await waitFor(
      async () => {
        const pttl = await h.redis.pttl(lockKey);
        if (pttl < 0) missing += 1;
        else if (pttl > last) renewals += 1;
        last = pttl;
        return missing > 0 || (Date.now() - takenAt > 2500 && renewals >= 2);
      },
      'the lock to be held for 2.5 s',
      15_000,
    );
    expect(missing).toBe(0);
    expect(renewals).toBeGreaterThanOrEqual(2);
    // still held, so another dispatch finds the stage in flight
    expect(await h.engine.dispatchStage(image, {})).toEqual({
      dispatched: false,
      reason: 'dispatch_in_flight',
      retryable: true,
    });
    expect(calls).toBe(1);
    // the renewals did not abort the executor: a renewed lock is neither lost nor cancelled
    expect(signal!.aborted).toBe(false);
    latch.open();
    expect(await first).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT });
    expect(await h.redis.exists(lockKey)).toBe(0);
  });
});

describe('C12: ctx.signal', () => {
  it('close() aborts the signal of a running executor, with ENGINE_CLOSED', async () => {
    let seen: AbortSignal | undefined;
    const h = harness({
      executor: async (_ref, _payload, ctx) => {
        seen = ctx.signal;
        // answers only when aborted (close() waits for running executors)
        return new Promise<ExecutorResult>((_resolve, reject) =>
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
});
