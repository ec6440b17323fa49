import type { Worker } from 'bullmq';
import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** Every error a worker's jobs failed with, as `{ id, code, final }` (final: BullMQ will not retry it). */
function failures(worker: Worker) {
  const out: { id: string; code: unknown; final: boolean }[] = [];
  worker.on('failed', (job, err) =>
    out.push({
      id: job?.id as string,
      code: (err as Error & { code?: unknown }).code,
      final: err.name === 'UnrecoverableError' || (job?.attemptsMade ?? 0) >= (job?.opts.attempts ?? 1),
    }),
  );
  return out;
}

describe('C23: a worker job fails with a stable error code', () => {
  it('DISPATCH_FAILED for a non-deferrable outcome, on a retried failure and on the last one', async () => {
    const h = harness({ retry: { attempts: 2, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.fallback = notSent('send_failed');
    const { jobId } = await h.engine.enqueue(image, {});
    const failed = failures(h.engine.createWorker());
    await waitFor(() => failed.length === 2, 'two failures');
    expect(failed).toEqual([
      { id: jobId, code: 'DISPATCH_FAILED', final: false },
      { id: jobId, code: 'DISPATCH_FAILED', final: true },
    ]);
  });

  it('INVALID_JOB_DATA for a job whose data this library did not write', async () => {
    const h = harness();
    const job = await h.engine.queue.add('image', { v: 1, scope: 'not-an-array' }, { attempts: 5 });
    const failed = failures(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the bad job to fail');
    expect(failed).toEqual([{ id: job.id, code: 'INVALID_JOB_DATA', final: true }]);
  });

  it('DEFERRAL_LIMIT when the capacity deferrals in a row pass the limit', async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 }, limits: { maxCapacityDeferrals: 1 } });
    h.executor.fallback = notSent('no_worker_available');
    const deferred: string[] = [];
    h.engine.on('deferred', (e) => deferred.push(e.wakeUpJobId));
    await h.engine.enqueue(image, {});
    const failed = failures(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the wake-up to fail');
    expect(failed).toEqual([{ id: deferred[0], code: 'DEFERRAL_LIMIT', final: true }]);
  });
});

describe('C23: dispatchStage and listDeferred', () => {
  it('limitReached is true in the result when dispatchStage hits the capacity bound', async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 }, limits: { maxCapacityDeferrals: 1 } });
    h.executor.fallback = notSent('no_worker_available');
    const first = await h.engine.dispatchStage(image, {});
    expect(first).toMatchObject({ reason: 'no_worker_available', retryable: true });
    expect(first.limitReached).toBeUndefined();
    // no worker runs the wake-up; after the window the scheduler dispatches the stage again, in the same chain
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the window to end');
    const second = await h.engine.dispatchStage(image, {});
    expect(second).toEqual({
      dispatched: false,
      reason: 'no_worker_available',
      retryable: false,
      limitReached: true,
      result: notSent('no_worker_available'),
    });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(h.executor.calls).toHaveLength(2);
  });

  it.each([
    ['a string', 'book-1'],
    ['an empty segment', ['book-1', '']],
    ['a non-string segment', ['book-1', 7]],
    ['nine segments', ['1', '2', '3', '4', '5', '6', '7', '8', '9']],
    ['a lone surrogate', ['\uD800']],
  ])('listDeferred with a malformed scope (%s) rejects with INVALID_STAGE_REF', async (_what, scope) => {
    const h = harness();
    await expect(h.engine.listDeferred(scope as never)).rejects.toMatchObject({
      name: 'InvalidStageRefError',
      code: 'INVALID_STAGE_REF',
    });
  });
});
