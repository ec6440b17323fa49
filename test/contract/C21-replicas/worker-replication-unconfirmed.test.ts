import type { StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { stubWait } from '../../helpers/replica-wait';

/**
 * Q1: a dispatch job whose write ran but whose replica WAIT failed now throws
 * ReplicationUnconfirmedError. (A) a deferral's record: the job is retried and its retry finds the
 * stage deferred (nothing sent again). (B) the job-failed mark of a job that must fail for good
 * (DeferralLimitError): failForGood (src/bullmq/processor.ts) let the mark's error through
 * unwrapped, so BullMQ retried a job that was to end for good (older than 8e4123c, which only
 * typed the error). Fixed: a mark that ran, its replicas unconfirmed, still fails the job for good.
 */

it('C21: a deferral whose replica WAIT failed: the job is retried and the retry finds the stage deferred', async () => {
  const a: StageRef = { scope: ['r50-defer', 'ch-1'], stage: 'image' };
  const h = harness({
    windows: { capacitySeconds: 300, jitter: 0 },
    waitForReplicas: { replicas: 1, timeoutMs: 10 },
    retry: { attempts: 3, backoff: fast },
  });
  const w = await stubWait(h.engine.queue);
  try {
    h.executor.script(
      a,
      async () => {
        w.fail(1); // the next WAIT: the deferral record's
        return notSent('no_worker_available');
      },
      SENT,
    );
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: true });
    const worker = h.engine.createWorker();
    const seen = watch(worker);
    await waitFor(() => seen.done.length > 0, 'the retried job to complete');
    expect(w.failed()).toBe(1);
    expect(seen.failed.map((f) => (f.error as Error & { code?: string }).code)).toEqual(['REPLICATION_UNCONFIRMED']);
    expect(seen.done).toHaveLength(1);
    expect(seen.done[0]!.result).toMatchObject({ dispatched: false, deferred: true });
    expect(h.executor.calls.length).toBe(1);
    expect(await h.engine.isStageDeferred(a)).toBe(true);
    await worker.close();
  } finally {
    w.restore();
  }
});

it('C21: a job that must fail for good (deferral limit) whose failure mark WAIT failed still fails for good', async () => {
  const a: StageRef = { scope: ['r50-limit', 'ch-1'], stage: 'image' };
  const h = harness({
    windows: { capacitySeconds: 1, jitter: 0 },
    waitForReplicas: { replicas: 1, timeoutMs: 10 },
    retry: { attempts: 3, backoff: fast },
    limits: { maxCapacityDeferrals: 1, maxIdempotentDeferrals: 3 },
  });
  const w = await stubWait(h.engine.queue);
  try {
    h.executor.script(
      a,
      notSent('no_worker_available'),
      async () => {
        w.fail(1); // the next WAIT: the job-failed mark's
        return notSent('no_worker_available');
      },
      notSent('no_worker_available'),
      notSent('no_worker_available'),
    );
    expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
    const worker = h.engine.createWorker();
    const seen = watch(worker);
    await waitFor(
      () => seen.failed.some((f) => (f.error as { code?: string }).code === 'DEFERRAL_LIMIT'),
      'the job to fail for good',
    );
    expect(w.failed()).toBe(1);
    // wanted: one failure, for good, with DEFERRAL_LIMIT; the stage not sent to the executor again
    // (observed: REPLICATION_UNCONFIRMED first, BullMQ retried the job, the retry called the executor again,
    // deferred afresh, and its wake-up hit the limit again: 4 executor calls)
    expect(h.executor.calls.length).toBe(2);
    expect(seen.failed.map((f) => (f.error as Error & { code?: string }).code)).toEqual(['DEFERRAL_LIMIT']);
    await worker.close();
  } finally {
    w.restore();
  }
});
