import { DeferralLimitError, isStageDeferralError } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { completions, failedForGood } from '../../helpers/attempts';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const short = { windows: { capacitySeconds: 0.3, idempotentSeconds: 0.6, jitter: 0 } };

describe('C7: deferral is bounded', () => {
  it('too many capacity deferrals in a row fail the job with a typed error naming reason and count', async () => {
    const h = harness({ ...short, windows: { capacitySeconds: 0.05, jitter: 0 }, limits: { maxCapacityDeferrals: 3 } });
    h.executor.fallback = notSent('duplicate_pending');
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = completions(h, worker);
    await waitFor(() => failed.length === 1, 'terminal failure');
    // 10.13: the failed job keeps the typed error, and the count is the deferrals it had (3), not 4
    expect(failed[0]!.message).toMatch(/deferred 3 times in a row for capacity and answered duplicate_pending again/);
    expect(failed[0]!.error).toBeInstanceOf(DeferralLimitError);
    expect(isStageDeferralError(failed[0]!.error)).toBe(true);
    expect(failed[0]!.error).toMatchObject({ code: 'DEFERRAL_LIMIT', deferrals: 3, reason: 'duplicate_pending' });
    expect(h.executor.calls).toHaveLength(4);
    expect(await h.engine.queue.getJobCounts('delayed', 'wait')).toEqual({ delayed: 0, wait: 0 });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    const [job] = await h.engine.queue.getJobs(['failed']);
    expect(job!.attemptsMade).toBe(1);
  });

  it('the failed job can be retried by hand with a fresh chain (it may defer again), and does not block enqueue', async () => {
    const { h, worker, done } = await failedForGood();
    expect(h.executor.calls).toHaveLength(2);
    // a producer may enqueue the stage again: the failed wake-up is not pending.
    // (The worker is closed, not paused: on a Redis Cluster, BullMQ 6.7's
    // `Worker.pause()` can hang for good in its blocking-connection reconnect.)
    await worker.close();
    const again = await h.engine.enqueue(image, {});
    expect(again).toMatchObject({ added: true });
    await h.engine.queue.remove(again.jobId!);
    // retry by hand (as from Bull Board): it runs with a fresh chain, so with
    // maxCapacityDeferrals 1 it may defer once more (deferral #1), and its wake-up dispatches
    const [job] = await h.engine.queue.getJobs(['failed']);
    const deferred: { deferrals: number; wakeUpJobId: string }[] = [];
    h.engine.on('deferred', (e) => deferred.push(e));
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await job!.retry('failed');
    const after = completions(h, h.engine.createWorker());
    await waitFor(
      async () =>
        after.done.some((d) => (d.result as { dispatched?: boolean }).dispatched) ||
        ((await h.engine.queue.getJobCounts('failed')).failed ?? 0) > 0,
      'the retried chain to end',
    );
    expect(after.failed).toEqual([]);
    expect(deferred).toEqual([expect.objectContaining({ deferrals: 1 })]);
    // capacity 1, idempotent 0; the failures field holds the retried job's own attemptsMade (BullMQ keeps it)
    expect(deferred[0]!.wakeUpJobId).toMatch(/@cap\.1\.0\.\d+\./);
    expect(after.done.map((d) => d.id)).toEqual([job!.id, deferred[0]!.wakeUpJobId]);
    expect(h.executor.calls).toHaveLength(4);
    expect(done).toHaveLength(1); // the first worker saw only the enqueued job complete
  });

  it('repeated idempotent outcomes complete the stage as already done, with no further wake-up', async () => {
    const h = harness({
      windows: { capacitySeconds: 0.05, idempotentSeconds: 0.05, jitter: 0 },
      limits: { maxIdempotentDeferrals: 2 },
    });
    h.executor.fallback = notSent('already_completed');
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done } = completions(h, worker);
    await waitFor(() => done.some((d) => (d.result as { completed?: boolean }).completed), 'completed as done');
    expect(h.executor.calls).toHaveLength(3);
    expect(await h.engine.queue.getJobCounts('delayed', 'wait', 'failed')).toEqual({ delayed: 0, wait: 0, failed: 0 });
  });
});
