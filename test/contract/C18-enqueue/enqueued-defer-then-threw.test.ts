import { notSent } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { dropsAfterFirstDeferral } from '../../helpers/attempts';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };

describe('C18: an enqueued job that deferred, then threw (it is retried)', () => {
  it('gave up its deduplication: an enqueue after the deferral ended adds a new job', async () => {
    const h = dropsAfterFirstDeferral(60_000);
    h.executor.script(image, notSent('no_worker_available'));
    const first = await h.engine.enqueue(image, { p: 1 });
    const worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 1 && done.length === 1, 'the job threw; the wake-up dispatched');
    // the first job waits out its retry (60 s) and will stop as superseded: it must not absorb a new enqueue
    const again = await h.engine.enqueue(image, { p: 2 });
    expect(again).toMatchObject({ added: true });
    expect(again.jobId).not.toBe(first.jobId);
    await waitFor(() => done.length === 2, 'the new job dispatched');
    expect(h.executor.calls.map((c) => c.payload)).toEqual([{ p: 1 }, { p: 1 }, { p: 2 }]);
  });
});
