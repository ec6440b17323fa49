import { harness, notSent } from '../helpers/engine';
import { watch } from '../helpers/jobs';
import { waitFor } from '../helpers/redis';

/**
 * Review of issue 13.3: a producer that adds the contract's job without the
 * enqueue probe (docs/producers.md says it then only costs a suppressed job
 * per tick of a deferred stage).
 */
const ref = { scope: ['book-1', 'ch-2'], stage: 'image' };
const sid = 'book-1/ch-2/image';
const data = { v: 1, scope: ref.scope, stage: ref.stage, payload: null };
const opts = (n: number) => ({
  jobId: `${sid}@r.mx3p0000ab${n}`,
  deduplication: { id: sid },
  attempts: 3,
  backoff: { type: 'exponential' as const, delay: 1000 },
  removeOnComplete: true,
});

describe('13 review: a producer that skips the enqueue probe', () => {
  it('13 review: a probe-less job added while the stage is deferred completes as suppressed; the wake-up dispatches the stage once', async () => {
    const h = harness({ windows: { capacitySeconds: 0.5, jitter: 0 } });
    h.executor.script(ref, notSent('no_worker_available'));
    await h.engine.dispatchStage(ref, null);
    expect(await h.engine.isStageDeferred(ref)).toBe(true);
    await h.engine.queue.add(ref.stage, data, opts(1));
    const { done } = watch(h.engine.createWorker({ concurrency: 1 }));
    await waitFor(() => done.length === 2, 'the job and the wake-up to complete');
    expect(done[0]).toMatchObject({ id: opts(1).jobId, result: { dispatched: false } });
    expect(h.executor.callsFor(ref)).toBe(2);
  });

  it("13 review: a probe-less job added once the window ended, while the stage's wake-up waits for a worker, does not dispatch the stage a second time after the wake-up did", async () => {
    const h = harness({ windows: { capacitySeconds: 0.2, jitter: 0 } });
    h.executor.script(ref, notSent('no_worker_available'));
    await h.engine.dispatchStage(ref, null);
    const [deferred] = await h.engine.listDeferred();
    await waitFor(async () => !(await h.engine.isStageDeferred(ref)), 'the window to end');
    // the wake-up is due and waits for a free worker (busy workers promote it into wait)...
    await (await h.engine.queue.getJob(deferred!.wakeUpJobId))!.promote();
    // ...when a producer tick adds the stage's job without asking the probe (it would answer
    // `pending` with the wake-up's id)
    await h.engine.queue.add(ref.stage, data, opts(2));
    const { done } = watch(h.engine.createWorker({ concurrency: 1 }));
    await waitFor(() => done.length === 2, 'the wake-up and the job to complete');
    expect(done.map((d) => d.id)).toEqual([deferred!.wakeUpJobId, opts(2).jobId]);
    // the deferral and one dispatch: the stage was dispatched by its wake-up already
    expect(h.executor.callsOf(ref).map((c) => c.result?.dispatched)).toEqual([false, true]);
  });
});
