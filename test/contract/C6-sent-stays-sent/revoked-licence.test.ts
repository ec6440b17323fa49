import { notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { dropsAfterFirstDeferral } from '../../helpers/attempts';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
const crash = new Error('executor crashed');

describe('C6: a job whose licence another attempt revoked, and that was not removed', () => {
  it('does not dispatch the stage again when it runs (it was marked superseded)', async () => {
    // the direct call's deferral is written, then its connection drops before the revoked job is removed
    const h = dropsAfterFirstDeferral(1_500);
    // the enqueued job fails (it holds the stage while it waits 1.5 s); a direct call defers;
    // the wake-up dispatches; then the enqueued job's retry runs
    h.executor.script(image, crash, notSent('no_worker_available'));
    const { jobId } = await h.engine.enqueue(image, { p: 1 });
    const worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the enqueued job failed once');
    await expect(h.engine.dispatchStage(image, { p: 1 })).rejects.toThrow(/connection closed/);
    expect(await h.engine.queue.getJobState(jobId!)).toBe('delayed');
    await waitFor(() => done.length === 2, 'the wake-up and the retried job completed', 20_000);
    const sent = h.executor.calls.filter((c) => c.result === SENT);
    expect(sent).toHaveLength(1);
    expect(done.find((d) => d.id === jobId)?.result).toMatchObject({
      dispatched: false,
      reason: 'superseded',
      retryable: false,
    });
  });
});
