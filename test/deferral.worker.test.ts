import { promote } from '../src/bullmq/adapter';
import { Job } from 'bullmq';
import { DeferralLimitError, isStageDeferralError } from '../src';
import { parseLicence } from '../src/job-data';
import { harness, notSent, SENT } from './helpers/engine';
import { waitFor } from './helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const short = { windows: { capacitySeconds: 0.3, idempotentSeconds: 0.6, jitter: 0 } };

function completions(
  h: ReturnType<typeof harness>,
  worker: ReturnType<ReturnType<typeof harness>['engine']['createWorker']>,
) {
  const done: { id: string; result: unknown }[] = [];
  const failed: { id: string; message: string; attemptsMade: number; error: Error }[] = [];
  worker.on('completed', (job, result) => done.push({ id: job.id as string, result }));
  worker.on('failed', (job, err) =>
    failed.push({ id: job?.id as string, message: err.message, attemptsMade: job?.attemptsMade ?? -1, error: err }),
  );
  return { done, failed };
}

/** A stage whose wake-up failed for good (one capacity deferral allowed, then the limit), with its worker. */
async function failedForGood() {
  const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 }, limits: { maxCapacityDeferrals: 1 } });
  h.executor.fallback = notSent('no_worker_available');
  await h.engine.enqueue(image, {});
  const worker = h.engine.createWorker();
  const { failed, done } = completions(h, worker);
  await waitFor(() => failed.length === 1, 'terminal failure');
  return { h, worker, done };
}

describe('clause 5: the stage comes back by itself when the window ends', () => {
  it('the delayed wake-up carries payload and buildId and dispatches again through a real Worker', async () => {
    const h = harness(short);
    h.executor.script(image, notSent('no_worker_available'), notSent('no_worker_available'), SENT);
    const r = await h.engine.enqueue(image, { scene: 7 }, { buildId: 'build-3' });
    expect(r.added).toBe(true);
    const worker = h.engine.createWorker();
    const { done } = completions(h, worker);
    await waitFor(() => h.executor.calls.length === 3 && done.length === 3, 'three attempts');
    // a job's call is never forced, with a build or without (force is a direct call's option)
    expect(h.executor.calls.map((c) => [c.payload, c.buildId, c.force])).toEqual([
      [{ scene: 7 }, 'build-3', false],
      [{ scene: 7 }, 'build-3', false],
      [{ scene: 7 }, 'build-3', false],
    ]);
    expect(h.journal.map((j) => (j.event as { deferrals: number }).deferrals)).toEqual([1, 2]);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(await h.engine.listDeferred()).toEqual([]);
    expect(await h.redis.zcard(`${h.prefix}:${h.queueName}:sd:licences`)).toBe(0);
  });

  it('a restart of every worker loses nothing: a new engine picks the wake-up up', async () => {
    const h = harness(short);
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, { v: 1 }, { buildId: 'b' });
    await h.engine.close();
    const h2 = harness(short, { prefix: h.prefix, queueName: h.queueName });
    h2.engine.createWorker();
    await waitFor(() => h2.executor.calls.length === 1, 'wake-up dispatched by the new engine');
    expect(h2.executor.calls[0]).toMatchObject({ payload: { v: 1 }, buildId: 'b' });
    await waitFor(
      async () => (await h2.engine.queue.getJobCounts('delayed', 'wait', 'active')).delayed === 0,
      'drained',
    );
  });

  it('the wake-up job is readable: named after the stage, data shows reason, class, count; runs at the window end; one log line (jobLog: true)', async () => {
    const h = harness({ jobLog: true });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, { p: 1 });
    const [d] = await h.engine.listDeferred(['book-1']);
    const job = await Job.fromId(h.engine.queue, d!.wakeUpJobId);
    expect(job!.name).toBe('image');
    expect(job!.id).toMatch(/^book-1\/ch-2\/sc-7\/image@cap\.1\./);
    expect(job!.data).toMatchObject({
      scope: image.scope,
      stage: 'image',
      reason: 'no_worker_available',
      class: 'capacity',
      deferrals: 1,
    });
    // the window's end is in the id (and the marker's expiry); the job runs then: timestamp + delay
    const windowEnd = parseLicence(job!.id!)!.until;
    expect(Math.abs(windowEnd - d!.until)).toBeLessThan(1000);
    expect(Math.abs(job!.timestamp + job!.delay - windowEnd)).toBeLessThan(5);
    const logs = await h.engine.queue.getJobLogs(job!.id as string);
    expect(logs.logs).toHaveLength(1);
    expect(logs.logs[0]).toMatch(/deferred #1 \(capacity\): no_worker_available/);
  });
});

describe('clause 10: deferrals never spend the retry budget; real failures do, across deferrals', () => {
  it('capacity outcomes do not count; real failures retry with BullMQ backoff and end after `attempts` in total', async () => {
    const h = harness({ ...short, retry: { attempts: 3, backoff: { type: 'fixed', delay: 50 } } });
    h.executor.script(
      image,
      notSent('send_failed'),
      notSent('no_worker_available'),
      notSent('send_failed'),
      notSent('no_worker_available'),
      notSent('send_failed'),
      SENT,
    );
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = completions(h, worker);
    await waitFor(() => failed.length === 3, 'three real failures');
    await waitFor(async () => (await h.engine.queue.getJobCounts('failed')).failed === 1, 'terminal failure');
    // 5 attempts: 3 failures spent the budget of 3; the 2 deferrals spent nothing. The 6th answer never ran.
    expect(h.executor.calls).toHaveLength(5);
    const [job] = await h.engine.queue.getJobs(['failed']);
    expect(job!.failedReason).toMatch(/send_failed/);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });

  it('14.1: a success starts a fresh budget: failures carried by a chain are not charged to the next chain', async () => {
    // attempts: 2, so a chain that has spent one failure has none left.
    const h = harness({ ...short, retry: { attempts: 2, backoff: { type: 'fixed', delay: 20 } } });
    h.executor.script(
      image,
      notSent('no_worker_available'), // the enqueued job defers: wake-up #1
      notSent('send_failed'), // wake-up #1 fails once (1 of 2 spent), BullMQ retries it
      notSent('no_worker_available'), // its retry defers again: wake-up #2 carries that failure
      SENT, // wake-up #2 succeeds: the chain ends
      notSent('no_worker_available'), // a scheduler's dispatchStage defers the stage again: wake-up #3
      notSent('send_failed'), // wake-up #3 fails once: not final in a fresh chain, retried
      SENT,
    );
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done, failed } = completions(h, worker);
    const dispatched = () => done.filter((d) => (d.result as { dispatched?: boolean }).dispatched).length;
    await waitFor(() => dispatched() === 1, 'the first chain dispatched');
    // the chain really carried a failure: wake-up #2's id records capacity 2, failures 1
    expect(wakeUps).toHaveLength(2);
    expect(wakeUps[1]).toMatch(/@cap\.2\.0\.1\./);
    expect(failed.map((f) => f.id)).toEqual([wakeUps[0]]);
    expect(await h.redis.zcard(`${h.prefix}:${h.queueName}:sd:licences`)).toBe(0);

    // the next chain starts at 0: its wake-up may fail once and still be retried
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'no_worker_available' });
    expect(wakeUps[2]).toMatch(/@cap\.1\.0\.0\./);
    await waitFor(
      async () => dispatched() === 2 || ((await h.engine.queue.getJobCounts('failed')).failed ?? 0) > 0,
      'the second chain to end',
    );
    expect(await h.engine.queue.getJobCounts('failed')).toEqual({ failed: 0 });
    expect(dispatched()).toBe(2);
    expect(failed.map((f) => f.id)).toEqual([wakeUps[0], wakeUps[2]]);
    expect(h.executor.calls).toHaveLength(7);
  });
});

describe('clause 11: one wake-up per deferred stage', () => {
  it('a wake-up that starts a few ms before its own marker expires is not swallowed by it', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    // The window is still open (marker alive) but the wake-up runs now: it must recognise its own marker.
    const id = (await h.engine.listDeferred())[0]!.wakeUpJobId;
    await promote(h.engine.queue, id);
    h.engine.createWorker();
    await waitFor(() => h.executor.calls.length === 2, 'wake-up dispatched');
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('a wake-up that lost its licence does nothing', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    const id = (await h.engine.listDeferred())[0]!.wakeUpJobId;
    await h.redis.zrem(`${h.prefix}:${h.queueName}:sd:licences`, id);
    await h.redis.del(h.engine.deferredStageKey(image));
    await promote(h.engine.queue, id);
    const worker = h.engine.createWorker();
    const { done } = completions(h, worker);
    await waitFor(() => done.length === 1, 'stale wake-up completed');
    expect(done[0]!.result).toMatchObject({ reason: 'stale_wake_up', retryable: false });
    expect(h.executor.calls).toHaveLength(1);
  });
});

describe('clause 14: deferral is bounded', () => {
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

  it('14.2: the failed job can be retried by hand with a fresh chain (it may defer again), and does not block enqueue', async () => {
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

describe('a cancel after a terminal failure', () => {
  it('10.1: keeps the failed job as a record, and a retry by hand then stops as cancelled', async () => {
    const { h, done } = await failedForGood();
    const calls = h.executor.calls.length;
    await h.engine.cancelActiveDispatch(image);
    const [job] = await h.engine.queue.getJobs(['failed']);
    expect(job).toBeDefined();
    await job!.retry('failed');
    await waitFor(() => done.length === 2, 'retried job completed');
    expect(done[1]!.result).toMatchObject({ reason: 'cancelled', cancelled: true, retryable: false });
    expect(h.executor.calls).toHaveLength(calls);
  });
});

describe('malformed job data', () => {
  it('fails that job unrecoverably; other jobs are unaffected', async () => {
    const h = harness();
    await h.engine.queue.add('image', { v: 1, scope: 'not-an-array' }, { attempts: 5 });
    await h.engine.queue.add('image', { v: 1, scope: [], stage: 'image', payload: 1 }, { attempts: 5 });
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done, failed } = completions(h, worker);
    await waitFor(() => done.length === 1 && failed.length === 2, 'one done, two failed');
    for (const f of failed) expect(f.attemptsMade).toBe(1);
    expect(failed.map((f) => f.message).join()).toMatch(/Malformed dispatch job/);
    expect(failed.map((f) => f.message).join()).toMatch(/scope/);
    expect(h.executor.calls).toHaveLength(1);
  });
});

describe('clause 5: a job that fails after its deferral was written is not dispatched twice', () => {
  it('10.14: the retried enqueued job finds it was superseded by its deferral and stops; the stage is sent once', async () => {
    let thrown = false;
    const h = harness({
      windows: { capacitySeconds: 0.05, jitter: 0 },
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 300 } },
      // as if the connection dropped after the deferral was written (e.g. ReplicationUnconfirmedError)
      faultHook: (point) => {
        if (point === 'deferral-recorded' && !thrown) {
          thrown = true;
          throw new Error('connection closed after the deferral was written');
        }
      },
    });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done } = completions(h, worker);
    // the wake-up dispatches (window 50 ms); the enqueued job, retried after 300 ms, stops at its begin
    await waitFor(() => done.length === 2, 'the wake-up and the retried job completed');
    expect(h.executor.calls).toHaveLength(2); // the capacity answer, then the wake-up's dispatch
    const reasons = done.map((d) => (d.result as { reason: string | null }).reason);
    expect(reasons.sort()).toEqual(['superseded', null].sort());
    expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'active', 'failed')).toEqual({
      wait: 0,
      delayed: 0,
      active: 0,
      failed: 0,
    });
  });
});
