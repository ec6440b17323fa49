import { UnrecoverableError, type Job } from 'bullmq';
import { promote } from '../../../src/bullmq/adapter';
import { DeferralStore } from '../../../src/deferral-store';
import { harness, notSent, SENT, type Harness } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** Waits for the job to be in the delayed set, then records (in `delays`) and returns its delay as BullMQ wrote it. */
async function delayedAgain(h: Harness, job: Job, delays: number[]): Promise<number> {
  const key = `${h.prefix}:${h.queueName}`;
  let delay = -1;
  await waitFor(
    async () => {
      if ((await h.redis.zscore(`${key}:delayed`, job.id!)) === null) return false;
      delay = Number(await h.redis.hget(`${key}:${job.id!}`, 'delay'));
      return true;
    },
    `job delayed (${delays.length + 1})`,
  );
  delays.push(delay);
  return delay;
}

describe('C11: processor: a job retried by hand waits out the backoff the engine computes', () => {
  it.each([
    ['fixed', [1000, 1000]],
    ['exponential', [1000, 2000]],
  ] as const)(
    '%s backoff: past BullMQ own count, each real failure re-delays the job by the chain backoff and logs it',
    async (type, expected) => {
      const h = harness({ retry: { attempts: 3, backoff: { type, delay: 1000 } } });
      h.executor.fallback = notSent('send_failed');
      const { jobId } = await h.engine.enqueue(image, {});
      const { failed } = watch(h.engine.createWorker());
      // BullMQ's own retries: promoted by hand instead of waited for
      for (let n = 1; n < 3; n++) {
        await waitFor(() => failed.length === n, `real failure ${n}`);
        await waitFor(async () => (await h.engine.queue.getJobState(jobId!)) === 'delayed', `BullMQ retry ${n}`);
        await promote(h.engine.queue, jobId!);
      }
      await waitFor(async () => (await h.engine.queue.getJobState(jobId!)) === 'failed', 'failed for good');
      expect(h.executor.calls).toHaveLength(3);

      // an operator retries it (Bull Board): BullMQ's count is spent (atm 3), so the engine re-delays it
      const job = (await h.engine.queue.getJob(jobId!))!;
      await job.retry('failed');
      const delays: number[] = [];
      for (const want of expected) {
        const got = await delayedAgain(h, job, delays);
        // BullMQ records `timestamp - now` a moment after the engine computed the timestamp
        expect(got).toBeLessThanOrEqual(want);
        expect(got).toBeGreaterThan(want - 500);
        await promote(h.engine.queue, jobId!);
      }
      await waitFor(async () => (await h.engine.queue.getJobState(jobId!)) === 'failed', 'failed for good again');
      expect(h.executor.calls).toHaveLength(6);
      const { logs } = await h.engine.queue.getJobLogs(jobId!);
      expect(logs.filter((l) => l.startsWith('attempt failed ('))).toEqual([
        expect.stringMatching(/^attempt failed \(1 of 3 in this chain\): .*send_failed/),
        expect.stringMatching(/^attempt failed \(2 of 3 in this chain\): .*send_failed/),
      ]);
    },
  );
});

describe('C11: processor: an error that ends the job for good', () => {
  it("an UnrecoverableError from the executor fails the job as it is: the job's stack trace is the executor's", async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    function thrownByTheExecutor(): Error {
      return new UnrecoverableError('the model refuses this payload');
    }
    h.executor.script(image, thrownByTheExecutor());
    const { jobId } = await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the job failed');
    await waitFor(async () => (await h.engine.queue.getJobState(jobId!)) === 'failed', 'failed for good');
    const job = (await h.engine.queue.getJob(jobId!))!;
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toBe('the model refuses this payload');
    expect(job.stacktrace?.[0]).toContain('thrownByTheExecutor');
  });
});

describe('C11: which budget ends a real failure', () => {
  it("a real failure at the Worker's last allowed start fails the job then, with the executor's error (not BullMQ's 'started more than allowable limit' at the next fetch)", async () => {
    const h = harness({ retry: { attempts: 5, backoff: fast } });
    h.executor.script(image, new Error('down #1'), new Error('down #2'), SENT);
    await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker({ maxStartedAttempts: 2 }));
    await waitFor(() => failed.length === 2, 'two failures');
    const [job] = await h.engine.queue.getJobs(['failed']);
    expect(job).toBeDefined();
    expect({ reason: job!.failedReason, calls: h.executor.callsFor(image) }).toEqual({ reason: 'down #2', calls: 2 });
    // the engine ends it itself, as its last failure: unrecoverable, the executor's error its cause
    // (BullMQ 6 would also stop retrying there, but with the plain error)
    expect(failed.map((f) => f.error.name)).toEqual(['Error', 'UnrecoverableError']);
    expect((failed[1]!.error as Error & { cause?: Error }).cause?.message).toBe('down #2');
  });

  it('after a retry by hand (attempts kept) of a job that failed for good early, BullMQ’s count reaching the budget does not end a chain that has failures left: the engine retries it', async () => {
    const h = harness({ retry: { attempts: 3, backoff: fast } });
    // an UnrecoverableError ends the job at BullMQ's count 1; after the retry by hand the chain has 3 again
    h.executor.script(image, new UnrecoverableError('refused'), new Error('down #1'), new Error('down #2'), SENT);
    await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'failed for good');
    const [job] = await h.engine.queue.getJobs(['failed']);
    await job!.retry('failed');
    await waitFor(() => done.length === 1, 'the retried job ends');
    // its 2nd failure comes at BullMQ's count 2 (+1 = the job's attempts): the engine delays it itself
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(image)).toBe(4);
  });
});

describe('C11: the finished mark of a completed job', () => {
  it('a job BullMQ removes on completion (every job the engine adds) costs no mark request: only a job it keeps is marked', async () => {
    const h = harness();
    const marks: string[] = [];
    const spy = jest.spyOn(DeferralStore.prototype, 'markFinished').mockImplementation(async function (id: string) {
      marks.push(id);
    });
    try {
      h.executor.script(image, SENT, SENT);
      const removed = await h.engine.enqueue(image, {});
      const worker = h.engine.createWorker();
      const { done } = watch(worker);
      await waitFor(() => done.length === 1, 'the engine’s job completed');
      expect(removed.jobId).toBeDefined();
      // a job added by hand and kept once completed is marked (the same worker, the same path)
      await h.engine.queue.add(
        'image',
        { v: 1, scope: image.scope, stage: image.stage, payload: {} },
        { jobId: 'kept-1' },
      );
      await waitFor(() => done.length === 2, 'the kept job completed');
      // marked by the processor, then by the Worker's 'completed' listener (registered before `watch`'s)
      expect(marks).toEqual(['kept-1', 'kept-1']);
    } finally {
      spy.mockRestore();
    }
  });
});
