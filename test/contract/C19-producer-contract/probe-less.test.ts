import { harness, notSent } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * Check of a producer that adds the contract's job without the
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

describe('C19: a producer that skips the enqueue probe', () => {
  it('a probe-less job added while the stage is deferred completes as suppressed; the wake-up dispatches the stage once', async () => {
    // the harness's 30 s window: the job runs while the stage is still deferred, however slow the
    // machine; then wakeDeferred ends the window, instead of waiting for it
    const h = harness();
    h.executor.script(ref, notSent('no_worker_available'));
    await h.engine.dispatchStage(ref, null);
    expect(await h.engine.isStageDeferred(ref)).toBe(true);
    await h.engine.queue.add(ref.stage, data, opts(1));
    const { done } = watch(h.engine.createWorker({ concurrency: 1 }));
    await waitFor(() => done.length === 1, 'the job to complete');
    expect((await h.engine.wakeDeferred()).woken).toEqual([ref]);
    await waitFor(() => done.length === 2, 'the wake-up to complete');
    expect(done[0]).toMatchObject({ id: opts(1).jobId, result: { dispatched: false } });
    expect(h.executor.callsFor(ref)).toBe(2);
  });

  it("a probe-less job added once the window ended, while the stage's wake-up waits for a worker, does not dispatch the stage a second time after the wake-up did", async () => {
    const h = harness({ windows: { capacitySeconds: 0.2, jitter: 0 } });
    h.executor.script(ref, notSent('no_worker_available'));
    // the wake-up's id from the event, not from listDeferred: the 200 ms window may be over by the time we look
    const deferred: { wakeUpJobId: string }[] = [];
    h.engine.on('deferred', (e) => deferred.push(e));
    await h.engine.dispatchStage(ref, null);
    expect(deferred).toHaveLength(1);
    await waitFor(async () => !(await h.engine.isStageDeferred(ref)), 'the window to end');
    // the wake-up is due and waits for a free worker (busy workers promote it into wait)...
    await (await h.engine.queue.getJob(deferred[0]!.wakeUpJobId))!.promote();
    // ...when a producer tick adds the stage's job without asking the probe (it would answer
    // `pending` with the wake-up's id)
    await h.engine.queue.add(ref.stage, data, opts(2));
    const { done } = watch(h.engine.createWorker({ concurrency: 1 }));
    await waitFor(() => done.length === 2, 'the wake-up and the job to complete');
    expect(done.map((d) => d.id)).toEqual([deferred[0]!.wakeUpJobId, opts(2).jobId]);
    // the deferral and one dispatch: the stage was dispatched by its wake-up already
    expect(h.executor.callsOf(ref).map((c) => c.result?.dispatched)).toEqual([false, true]);
  });
});
