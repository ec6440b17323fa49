import { harness, SENT } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };

/** Host a dispatches the stage with an executor that does not stop at its signal; host b shares its queue. */
async function runningOnA(options: { lockMs?: number }) {
  const a = harness(options);
  const b = harness(options, { prefix: a.prefix, queueName: a.queueName });
  const release = latch<void>();
  a.executor.script(image, async () => {
    await release.opened;
    return SENT;
  });
  const first = a.engine.dispatchStage(image, { p: 1 });
  await waitFor(() => a.executor.calls.length === 1, 'the executor to start');
  return { b, release, first };
}

describe('C9: a dispatch cancelled from another host while its executor goes on', () => {
  it('keeps the stage in flight (its cancelled lock is renewed) until the executor ends: no second dispatch', async () => {
    const { b, release, first } = await runningOnA({ lockMs: 1000 });
    const cancelled = await b.engine.cancelActiveDispatch(image);
    expect(cancelled).toMatchObject({ inFlight: true });
    // for three lock lifetimes after the cancel, the other host finds the stage in flight
    const since = Date.now();
    const answers: (string | null)[] = [];
    await waitFor(
      async () => {
        answers.push((await b.engine.dispatchStage(image, { p: 2 })).reason);
        return Date.now() - since > 3_000;
      },
      'three lock lifetimes',
      20_000,
    );
    expect(new Set(answers)).toEqual(new Set(['dispatch_in_flight']));
    expect(b.executor.calls).toHaveLength(0);
    release.open();
    expect(await first).toMatchObject({ dispatched: true, cancelled: true });
  });
});

describe('C9: a dispatch cancelled twice from another host while its executor goes on', () => {
  it('still answers cancelled when the executor ends, and frees the stage: the next dispatch is sent', async () => {
    const { b, release, first } = await runningOnA({});
    expect(await b.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
    // the second cancel finds the lock already marked: it leaves the mark as it is
    expect(await b.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
    release.open();
    expect(await first).toMatchObject({ dispatched: true, cancelled: true });
    expect(await b.engine.dispatchStage(image, { p: 2 })).toMatchObject({ dispatched: true });
  });
});
