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
        // only the first call waits (a second one, had the lock lapsed, answers at once)
        if (calls > 1) return SENT;
        signal = ctx.signal;
        await latch.promise;
        return SENT;
      },
    });
    const first = h.engine.dispatchStage(image, {});
    await waitFor(() => signal !== undefined, 'the executor to start');
    try {
      const takenAt = Date.now();
      // Dispatch the stage again and again for 2.5 lock lifetimes: had the lock lapsed once (not
      // renewed), one of these would have taken the stage and called the executor a second time.
      const answers = new Set<string>();
      await waitFor(
        async () => {
          answers.add(JSON.stringify(await h.engine.dispatchStage(image, {})));
          return calls > 1 || Date.now() - takenAt > 2500;
        },
        'the stage to be held for 2.5 s',
        15_000,
      );
      expect(calls).toBe(1);
      expect([...answers].map((a) => JSON.parse(a) as unknown)).toEqual([
        { dispatched: false, reason: 'dispatch_in_flight', retryable: true },
      ]);
      // the renewals did not abort the executor: a renewed lock is neither lost nor cancelled
      expect(signal!.aborted).toBe(false);
    } finally {
      // (a failed assertion must not leave the executor waiting: teardown would wait for it)
      latch.open();
    }
    expect(await first).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT });
    // the lock ended with the dispatch: the next one is sent at once
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
    expect(calls).toBe(2);
  });
});
