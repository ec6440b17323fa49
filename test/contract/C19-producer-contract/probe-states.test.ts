import { harness, notSent } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';

/**
 * Check of the probe's reply (as `enqueue` answers it) in the
 * stage states a producer meets that the 13.3 tests do not walk through.
 */
const ref = { scope: ['states'], stage: 'image' };

describe('C19: the enqueue probe in every stage state', () => {
  it('failed for good -> added; retried by hand -> pending with that job; cancelled -> both removed, nothing kept, added', async () => {
    const h = harness({ retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(ref, new Error('boom'));
    const worker = h.engine.createWorker({ autorun: false });
    const { failed, done } = watch(worker);
    const first = await h.engine.enqueue(ref, null);
    void worker.run();
    await waitFor(() => failed.length === 1, 'the job to fail for good');
    await worker.pause();
    expect(await h.engine.queue.getJobState(first.jobId!)).toBe('failed');
    // failed for good: nothing pending, a new job is added
    const second = await h.engine.enqueue(ref, null);
    expect(second).toMatchObject({ added: true });
    // an operator retries the failed one by hand: pending with its id, its record kept
    await (await h.engine.queue.getJob(first.jobId!))!.retry('failed');
    expect(await h.engine.enqueue(ref, null)).toEqual({
      added: false,
      reason: 'pending',
      jobId: first.jobId,
      payloadTaken: false,
    });
    // cancelled: both jobs removed (or marked), nothing pending any more, a new job is added
    const cancel = await h.engine.cancelActiveDispatch(ref);
    expect(cancel.removedJobs).toBe(2);
    expect(await keptFor(h, ref)).toEqual([]);
    const third = await h.engine.enqueue(ref, null);
    expect(third).toMatchObject({ added: true });
    worker.resume();
    await waitFor(() => done.length === 1, 'the new job to complete');
    expect(done).toEqual([{ id: third.jobId, result: expect.objectContaining({ dispatched: true }) }]);
    expect(second.jobId).not.toBe(third.jobId);
  });

  it('cleared -> pending with the promoted wake-up; after it ran -> added', async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    h.executor.script(ref, notSent('no_worker_available'));
    await h.engine.dispatchStage(ref, null);
    const [d] = await h.engine.listDeferred();
    expect(await h.engine.enqueue(ref, null)).toMatchObject({ added: false, reason: 'deferred' });
    expect(await h.engine.clearDeferrals(['states'])).toBe(1);
    expect(await h.engine.enqueue(ref, null)).toEqual({
      added: false,
      reason: 'pending',
      jobId: d!.wakeUpJobId,
      payloadTaken: false,
    });
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the wake-up to run');
    expect(await h.engine.enqueue(ref, null)).toMatchObject({ added: true });
  });
});
