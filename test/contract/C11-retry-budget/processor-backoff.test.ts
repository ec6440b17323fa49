import { UnrecoverableError, type Job } from 'bullmq';
import { promote } from '../../../src/bullmq/adapter';
import { DeferralStore } from '../../../src/deferral-store';
import { expectUnwritten, harness, notSent, SENT, snapshot, type Harness } from '../../helpers/engine';
import { fast, fetchBy, heldExecutor, latch, watch } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';
import { failedRecordsOf } from '../../helpers/observe';

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

describe('C11: processor: the context a job dispatches with', () => {
  it('a job never dispatches with force (only a direct call may ask for it)', async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the job completed');
    expect(h.executor.calls.map((c) => c.force)).toEqual([false]);
  });
});

describe("C11: line 95: a job's stage lock is tied to BullMQ's lock of that job (the processor hands over its token)", () => {
  (onCluster ? it.skip : it)(
    '12: once BullMQ finishes the job while its executor still runs, the stage is no longer in flight for another host',
    async () => {
      const held = heldExecutor(SENT);
      const h = harness({ executor: held.executor });
      const other = harness({}, { prefix: h.prefix, queueName: h.queueName });
      other.executor.script(image, SENT);
      await h.engine.enqueue(image, {});
      const job = await fetchBy(h, 'bull-1');
      const running = h.engine.processor(job, 'bull-1').catch((e: Error) => e);
      try {
        await held.running;
        expect((await other.engine.dispatchStage(image, {})).reason).toBe('dispatch_in_flight');
        // BullMQ fails the job for good with the worker's own token (its lock deleted, finishedOn set)
        await job.moveToFailed(new UnrecoverableError('ended by BullMQ'), 'bull-1');
        expect(await job.getState()).toBe('failed');
        // the tied lock died with it: another host's call goes through at once (a plain lock would live on)
        expect((await other.engine.dispatchStage(image, {})).dispatched).toBe(true);
      } finally {
        held.release();
        await running;
      }
    },
  );
});

describe('C11: lines 124 and 132: which budget ends a real failure', () => {
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

describe("C11: the processor and BullMQ's lock of the job", () => {
  it('a worker whose BullMQ lock of the job lapsed before its dispatch began begins nothing: DelayedError, the job left active for BullMQ, nothing written', async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const job = await fetchBy(h, 'bull-1');
    await h.redis.del(`${h.prefix}:${h.queueName}:${job.id!}:lock`);
    const before = await snapshot(h.redis, h.prefix);
    await expect(h.engine.processor(job, 'bull-1')).rejects.toMatchObject({ name: 'DelayedError' });
    expect(h.executor.callsFor(image)).toBe(0);
    expect(await h.engine.queue.getJobState(job.id!)).toBe('active');
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
  });

  it("BullMQ's token '0' (no lock: BullMQ's scripts check none) is a job without a token, and the job is dispatched", async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const job = await fetchBy(h, '0');
    expect(await h.redis.exists(`${h.prefix}:${h.queueName}:${job.id!}:lock`)).toBe(0);
    expect(await h.engine.processor(job, '0')).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(image)).toBe(1);
  });
});

describe('C11: a job whose hash is deleted by hand while its executor runs', () => {
  it('its real failure makes no hash for it again (the release sets no chain on it, the engine counts no retry on it)', async () => {
    const entered = latch();
    const fail = latch();
    let calls = 0;
    const h = harness({
      retry: { attempts: 2, backoff: fast },
      executor: async () => {
        calls += 1;
        if (calls === 3) {
          entered.open();
          await fail.opened;
        }
        throw new Error(`down #${calls}`);
      },
    });
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 2, 'failed for good (2 of 2)');
    const [job] = await h.engine.queue.getJobs(['failed']);
    // retried by hand, attempts kept: BullMQ's count is spent, the chain's is not, so the engine retries it itself
    await job!.retry('failed');
    await entered.opened;
    const key = `${h.prefix}:${h.queueName}:${job!.id!}`;
    await h.redis.del(key); // an operator's DEL in redis-cli (BullMQ will not remove a locked job)
    const errors: Error[] = [];
    worker.on('error', (e) => errors.push(e));
    fail.open();
    await waitFor(() => errors.length > 0, "BullMQ's refusal to move the deleted job");
    expect(await h.redis.exists(key)).toBe(0);
  });
});

describe('C11: line 72: a closed engine refuses every job without spending an attempt', () => {
  it('a job whose data is malformed is re-delayed too, not failed for good (the check runs on the next worker)', async () => {
    const h = harness();
    await h.engine.queue.add('image', { v: 1, scope: 'not-a-list', stage: 'image' });
    // the job as a user's own Worker holds it (on a connection of its own: the engine's is closed)
    const job = await fetchBy(h, 'bull-1');
    await h.engine.close();
    await expect(h.engine.processor(job, 'bull-1')).rejects.toMatchObject({ name: 'DelayedError' });
    expect(await job.getState()).toBe('delayed');
    expect(h.executor.calls).toEqual([]);
  });
});

(onCluster ? describe.skip : describe)(
  'C11: a worker that lost BullMQ’s lock of its job (it stalled: redelivered) ends nothing',
  () => {
    it.each([
      ['the capacity bound', notSent('no_worker_available'), 'DEFERRAL_LIMIT'],
      ['a real failure with no attempt left', new UnrecoverableError('broken'), undefined],
    ] as const)(
      '%s: no failed-job record from the stalled worker; the redelivered job meets it itself',
      async (_what, answer, code) => {
        const gate = latch<void>();
        let calls = 0;
        const h = harness({
          limits: { maxCapacityDeferrals: 1, maxIdempotentDeferrals: 3 },
          executor: async () => {
            calls += 1;
            if (calls === 2) await gate.opened;
            if (calls === 1) return notSent('no_worker_available');
            if (answer instanceof Error) throw answer;
            return answer;
          },
        });
        // one capacity deferral: the chain is at its bound (1); its wake-up is due at once
        expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
        expect((await h.engine.wakeDeferred({})).woken).toHaveLength(1);
        const job: Job = await fetchBy(h, 'bull-1');
        // worker A runs it; while its executor runs, A stalls past BullMQ's lockDuration and the job
        // is handed to worker B (BullMQ's lock of it now holds B's token)
        const a = (h.engine.processor(job, 'bull-1') as Promise<unknown>).catch((e: unknown) => e);
        await waitFor(() => calls === 2, "A's executor to start");
        await h.redis.set(`${h.prefix}:${h.queueName}:${job.id}:lock`, 'bull-2');
        gate.open();
        // A: quiet (DelayedError: BullMQ would refuse its failure), and no failed-job record
        expect(await a).toMatchObject({ name: 'DelayedError' });
        expect(await failedRecordsOf(h.redis, h, image)).toEqual([]);
        // B: the same chain, so the same end: the job fails for good, recorded; no new deferral
        const b = await (h.engine.processor(job, 'bull-2') as Promise<unknown>).catch((e: unknown) => e);
        if (code) expect(b).toMatchObject({ code });
        else expect(b).toMatchObject({ message: 'broken' });
        expect(await failedRecordsOf(h.redis, h, image)).toEqual([job.id]);
      },
    );
  },
);

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
