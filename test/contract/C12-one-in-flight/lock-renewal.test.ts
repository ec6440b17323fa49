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

describe('C12: the lock is renewed every third of lockMs', () => {
  // Only setInterval (the renewal ticker) runs on a fake clock: Redis, BullMQ and the harness keep
  // real time. A cancel from another host reaches the executor through the next renewal (which
  // finds the lock cancelled), so the renewal's moment is seen as the executor's signal.
  it("C12: a cancel from another host aborts ctx.signal at the first renewal, lockMs / 3 after the engine's start, and not before", async () => {
    jest.useFakeTimers({
      doNotFake: [
        'Date',
        'hrtime',
        'nextTick',
        'performance',
        'queueMicrotask',
        'setImmediate',
        'clearImmediate',
        'setTimeout',
        'clearTimeout',
      ],
    });
    try {
      const lockMs = 60_000;
      let signal: AbortSignal | undefined;
      const a = harness({
        lockMs,
        executor: async (_ref, _payload, ctx) => {
          signal = ctx.signal;
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          return SENT;
        },
      });
      const b = harness({ lockMs }, { prefix: a.prefix, queueName: a.queueName });
      const first = a.engine.dispatchStage(image, {});
      await waitFor(() => signal !== undefined, 'the executor to start');
      expect(await b.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
      // one ms short of a third: no renewal yet, so the executor has not heard of the cancel
      jest.advanceTimersByTime(Math.floor(lockMs / 3) - 1);
      // (a renewal sent now would be answered before this read on the engine's own connection)
      await a.engine.isStageDeferred(image);
      expect(signal!.aborted).toBe(false);
      jest.advanceTimersByTime(1);
      await waitFor(() => signal!.aborted, 'the renewal a third of lockMs in to find the cancel', 10_000);
      expect(await first).toMatchObject({ dispatched: true, cancelled: true });
    } finally {
      jest.useRealTimers();
    }
  });
});
