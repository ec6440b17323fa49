import type { Job } from 'bullmq';
import { Worker } from 'bullmq';
import { DeferralStore } from '../src/deferral-store';
import { stageId, type DispatchContext, type ExecutorResult, type StageRef } from '../src';
import { expectUnwritten, harness, notSent, SENT, snapshot, type Answer, type Harness } from './helpers/engine';
import { connect, waitFor } from './helpers/redis';
import { fast, latch, watch } from './helpers/jobs';

/**
 * Issue 10: the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

async function failedJob(h: Harness): Promise<Job> {
  return waitFor(async () => (await h.engine.queue.getJobs(['failed']))[0], 'a failed job');
}

/**
 * Enqueues the stage on `h`, its executor given `answers` first, and runs the
 * engine's worker until the job failed `failures` times: the worker, and its
 * completed and failed jobs.
 */
async function failingJob(h: Harness, answers: Answer[], failures: number, what: string) {
  h.executor.script(image, ...answers);
  await h.engine.enqueue(image, {});
  const worker = h.engine.createWorker();
  const jobs = watch(worker);
  await waitFor(() => jobs.failed.length === failures, what);
  return { worker, ...jobs };
}

describe('10.1: a failed job retried by hand dispatches the stage, with a fresh budget', () => {
  it.each([false, true])('job.retry("failed") of an enqueued job (resetAttemptsMade: %s)', async (reset) => {
    const h = harness({ retry: { attempts: 2, backoff: fast } });
    const { done } = await failingJob(h, [new Error('down'), new Error('down')], 2, 'the budget spent');
    const job = await failedJob(h);
    // retried by hand: a fresh budget, so one more real failure is not final
    h.executor.script(image, new Error('still down'), SENT);
    await job.retry('failed', { resetAttemptsMade: reset });
    await waitFor(() => done.length === 1, 'the retried job completed');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(4);
    expect(await h.engine.queue.getJobCounts('failed', 'delayed', 'wait')).toEqual({ failed: 0, delayed: 0, wait: 0 });
  });

  it('a failed wake-up re-added by hand with queue.add(job.name, job.data) dispatches the stage', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } });
    const { done } = await failingJob(
      h,
      [notSent('no_worker_available'), new Error('down')],
      1,
      'the wake-up failed for good',
    );
    const job = await failedJob(h);
    expect(job.id).toMatch(/@cap\./); // the wake-up itself (its data re-added under another id)
    await h.engine.queue.add(job.name, job.data);
    await waitFor(() => done.length === 2, 'the re-added job completed');
    expect(done[1]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(3);
  });

  it('a failed job retried by hand after the stage was dispatched since still gets a fresh budget', async () => {
    const h = harness({ retry: { attempts: 2, backoff: fast } });
    const { done } = await failingJob(h, [new Error('down'), new Error('down')], 2, 'failed for good');
    const job = await failedJob(h);
    // the stage is enqueued again and dispatched: its chain (and the failed job's licence) ended
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    await waitFor(() => done.length === 1, 'the new job dispatched');
    h.executor.script(image, new Error('down again'), SENT);
    await job.retry('failed');
    await waitFor(() => done.length === 2, 'the retried job completed');
    // its first real failure was not final (BullMQ's own count was spent: the engine retried it)
    expect(done[1]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(5);
    expect(await h.engine.queue.getJobCounts('failed')).toEqual({ failed: 0 });
  });

  it('a failed job cancelled after it failed, then retried by hand, does not dispatch', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    const { done } = await failingJob(h, [new Error('down')], 1, 'failed for good');
    await h.engine.cancelActiveDispatch(image);
    await (await failedJob(h)).retry('failed');
    await waitFor(() => done.length === 1, 'the retried job completed');
    expect(done[0]!.result).toMatchObject({ reason: 'cancelled', cancelled: true });
    expect(h.executor.calls).toHaveLength(1);
  });

  // ENGINE BUG (found by the model test): the retried job holds the stage by its member `<id>?` until it
  // begins; cancelActiveDispatch takes every `?` member for a job still failed and removes none of them,
  // so the queued job stays (it later completes as cancelled) and removedJobs says 0.
  it('10.1: a cancel before the retried job began removes it (removedJobs: 1, nothing queued)', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    const { worker } = await failingJob(h, [new Error('down')], 1, 'failed for good');
    await worker.close();
    await (await failedJob(h)).retry('failed');
    const res = await h.engine.cancelActiveDispatch(image);
    expect(res).toMatchObject({ hadDeferral: false, inFlight: false, removedJobs: 1 });
    expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'failed')).toEqual({
      wait: 0,
      delayed: 0,
      failed: 0,
    });
  });

  it('a retry by hand while the stage is deferred is suppressed, not dispatched', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    const { done } = await failingJob(h, [new Error('down')], 1, 'failed for good');
    h.executor.script(image, notSent('no_worker_available'));
    expect((await h.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    await (await failedJob(h)).retry('failed');
    await waitFor(() => done.length === 1, 'the retried job completed');
    expect(done[0]!.result).toMatchObject({ deferred: true, reason: 'deferred_capacity' });
    expect(h.executor.calls).toHaveLength(2);
  });
});

describe("10.2: a host's ticks do not erase the retry budget", () => {
  it('a direct capacity deferral while a wake-up waits out its backoff carries its failures', async () => {
    const h = harness({
      retry: { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      windows: { capacitySeconds: 0.05, jitter: 0 },
    });
    const { failed } = await failingJob(
      h,
      [notSent('no_worker_available'), new Error('down #1')],
      1,
      'the wake-up failed once, now in backoff',
    );
    // the host's tick: a capacity answer defers the stage, revoking the wake-up in backoff
    h.executor.script(image, notSent('no_worker_available'), new Error('down #2'), SENT);
    // the id comes from the event, not from listDeferred: the 50 ms window may be over by the time we look
    const ids: string[] = [];
    h.engine.on('deferred', (e) => ids.push(e.wakeUpJobId));
    const r = await h.engine.dispatchStage(image, {});
    expect(r.reason).toBe('no_worker_available');
    // the new wake-up carries the failure: its first real failure is the chain's second, and final
    expect(ids).toEqual([expect.stringMatching(/@cap\.2\.0\.1\./)]);
    await waitFor(() => failed.length === 2, 'the second real failure');
    expect(failed[1]!.error.name).toBe('UnrecoverableError');
    expect(h.executor.calls.filter((_, i) => i > 0)).toHaveLength(3);
    expect(await h.engine.queue.getJobCounts('failed', 'delayed')).toEqual({ failed: 1, delayed: 0 });
  });
});

describe('10.3: a retry by hand after DeferralLimitError starts with no failure spent', () => {
  it('the next wake-up id carries 0 failures, and its first real failure is not final', async () => {
    const h = harness({
      retry: { attempts: 2, backoff: fast },
      windows: { capacitySeconds: 0.05, jitter: 0 },
      limits: { maxCapacityDeferrals: 1 },
    });
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the deferral limit');
    expect(failed[0]!.error).toMatchObject({ code: 'DEFERRAL_LIMIT' });
    const deferrals: string[] = [];
    h.engine.on('deferred', (e) => deferrals.push(e.wakeUpJobId));
    await worker.close();
    // retried by hand: the attempt defers once (a fresh chain), then its wake-up fails once and succeeds
    h.executor.fallback = SENT;
    h.executor.script(image, notSent('no_worker_available'), new Error('down'));
    await (await failedJob(h)).retry('failed');
    const again = watch(h.engine.createWorker());
    await waitFor(() => again.done.some((d) => d.result.dispatched === true), 'dispatched');
    expect(deferrals).toHaveLength(1);
    expect(deferrals[0]).toMatch(/@cap\.1\.0\.0\./);
    expect(again.failed).toHaveLength(1);
    expect(again.failed[0]!.error.name).not.toBe('UnrecoverableError');
    expect(done.length + again.done.length).toBeGreaterThan(0);
  });
});

/** An executor that waits until its signal is aborted (or `release` is called), then answers `answer`. */
function blocking(answer: 'throw' | ExecutorResult) {
  const started = latch<DispatchContext>();
  const released = latch();
  const fn = async (_ref: StageRef, _p: unknown, ctx: DispatchContext): Promise<ExecutorResult> => {
    started.open(ctx);
    await Promise.race([released.opened, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
    if (answer === 'throw') throw ctx.signal.reason ?? new Error('aborted');
    return answer;
  };
  return { fn, started: started.opened, release: () => released.open() };
}

describe('10.4: engine.close() spends no attempt and loses nothing', () => {
  it('an executor aborted by close() leaves the job to run again on the next worker', async () => {
    const first = blocking('throw');
    const a = harness({ retry: { attempts: 1, backoff: fast }, executor: first.fn });
    await a.engine.enqueue(image, {});
    a.engine.createWorker();
    await first.started;
    await a.engine.close();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const [job] = await b.engine.queue.getJobs(['delayed', 'wait'], 0, -1);
    expect(job).toBeDefined();
    expect(job!.attemptsMade).toBe(0);
    expect(await b.engine.queue.getJobCounts('failed')).toEqual({ failed: 0 });
    // the next engine on the queue runs it
    const { done } = watch(b.engine.createWorker());
    await waitFor(() => done.length === 1, 'the next worker ran it');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(await b.engine.queue.getJobCounts('failed')).toEqual({ failed: 0 });
  });
});

describe('10.5: close() keeps renewing the locks of running executors, and the processor refuses new jobs', () => {
  it("a second engine sees dispatch_in_flight past lockMs while a closing engine's executor still runs", async () => {
    const slow = blocking(SENT);
    const a = harness({
      lockMs: 1000,
      executor: async (r, p, ctx) => slow.fn(r, p, { ...ctx, signal: new AbortController().signal }),
    });
    const b = harness({ lockMs: 1000 }, { prefix: a.prefix, queueName: a.queueName });
    const dispatched = a.engine.dispatchStage(image, {});
    await slow.started;
    const closing = a.engine.close();
    const lock = new DeferralStore(b.engine.queue).keys.lock(stageId(image));
    // the lock outlives lockMs several times over: it is renewed while close() waits
    const pttls: number[] = [];
    await waitFor(async () => {
      pttls.push(await a.redis.pttl(lock));
      return pttls.filter((p, i) => i > 0 && p > pttls[i - 1]!).length >= 3;
    }, 'three renewals');
    expect((await b.engine.dispatchStage(image, {})).reason).toBe('dispatch_in_flight');
    expect(b.executor.calls).toHaveLength(0);
    slow.release();
    expect(await dispatched).toMatchObject({ dispatched: true });
    await closing;
  });

  it("a user's own Worker running engine.processor after close() does not start new attempts", async () => {
    const h = harness();
    const look = harness({}, { prefix: h.prefix, queueName: h.queueName });
    await h.engine.enqueue(image, {});
    await h.engine.close();
    const worker = new Worker(h.queueName, h.engine.processor, {
      connection: connect({ maxRetriesPerRequest: null }),
      prefix: h.prefix,
    });
    try {
      const job = await waitFor(async () => {
        const [j] = await look.engine.queue.getJobs(['delayed'], 0, -1);
        return j && j.attemptsStarted > 0 ? j : undefined;
      }, "the job moved back by the closed engine's processor");
      expect(job.attemptsMade).toBe(0);
      expect(h.executor.calls).toHaveLength(0);
    } finally {
      await worker.close();
    }
  });
});

describe('10.6: no attempt starts while another attempt holds the stage; a fencing token orders them', () => {
  it('ctx.fencingToken strictly increases per stage across engines', async () => {
    const a = harness();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    await a.engine.dispatchStage(image, {});
    await b.engine.dispatchStage(image, {});
    await a.engine.dispatchStage(image, {});
    const [a1, a2] = a.executor.calls.map((c) => c.fencingToken);
    const [b1] = b.executor.calls.map((c) => c.fencingToken);
    expect(a1).toBeGreaterThan(0);
    expect(b1).toBeGreaterThan(a1!);
    expect(a2).toBeGreaterThan(b1!);
  });
});

describe("10.7: the window is decided by Redis' clock", () => {
  it('a deferral made on a host 5 s behind: the wake-up is due and the marker expires at Redis time + window', async () => {
    const h = harness({ windows: { capacitySeconds: 3, jitter: 0 } });
    const real = Date.now.bind(Date);
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.isStageDeferred(image); // connect first, with the true clock
    // Redis' time (and this host's, unmocked) before and after the deferral: the bounds below allow
    // for the time the test itself took, not a fixed 500 ms of it
    const redisTime = async () => {
      const [s, us] = await h.redis.time();
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    const redisBefore = await redisTime();
    const started = performance.now();
    jest.spyOn(Date, 'now').mockImplementation(() => real() - 5000);
    await h.engine.dispatchStage(image, {});
    jest.restoreAllMocks();
    const redisAfter = await redisTime();
    const [d] = await h.engine.listDeferred();
    const score = Number(await h.redis.zscore(`${h.prefix}:${h.queueName}:delayed`, d!.wakeUpJobId));
    const due = Math.floor(score / 0x1000);
    expect(due - redisBefore).toBeGreaterThan(2500);
    expect(due - redisAfter).toBeLessThanOrEqual(3000);
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(image));
    expect(pttl).toBeGreaterThan(2500 - (performance.now() - started));
  });

  it('a wake-up started early by a worker clock ahead of Redis waits out the rest (delayed, no attempt spent)', async () => {
    // 3 s: still open when the test begins the wake-up, however slow the machine, and within the 5 s tolerance
    const h = harness({ windows: { capacitySeconds: 3, jitter: 0 }, maxClockSkewMs: 5000 });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    const [d] = await h.engine.listDeferred();
    const store = new DeferralStore(h.engine.queue);
    const early = await store.begin({
      sid: stageId(image),
      ownJobId: d!.wakeUpJobId,
      lockMs: 30_000,
      wakeUp: true,
      skewToleranceMs: 5000,
    });
    expect(early.kind).toBe('early');
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });

  it("an operator's Promote (Bull Board) wakes the stage now", async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    const [d] = await h.engine.listDeferred();
    const { done } = watch(h.engine.createWorker());
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.promote();
    await waitFor(() => done.length === 1, 'the promoted wake-up ran');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });
});

describe('10.8: a cancel reaches the running executor', () => {
  it('on the same engine: the signal aborts at once and the result says cancelled', async () => {
    const run = blocking(SENT);
    const h = harness({ executor: run.fn });
    const result = h.engine.dispatchStage(image, {});
    const ctx = await run.started;
    await h.engine.cancelActiveDispatch(image);
    expect(ctx.signal.aborted).toBe(true);
    expect(await result).toMatchObject({ dispatched: true, cancelled: true });
  });

  it('from another engine: the signal aborts within one lock renewal', async () => {
    const run = blocking(SENT);
    const a = harness({ lockMs: 1000, executor: run.fn });
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const result = a.engine.dispatchStage(image, {});
    const ctx = await run.started;
    await b.engine.cancelActiveDispatch(image);
    await waitFor(() => ctx.signal.aborted, 'the signal aborted');
    expect(await result).toMatchObject({ dispatched: true, cancelled: true });
  });
});

describe('10.9: a payload that cannot be serialised is refused before anything is called or written', () => {
  it.each([
    ['a BigInt', { n: 10n }],
    [
      'a cycle',
      (() => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      })(),
    ],
  ])('%s: INVALID_PAYLOAD from dispatchStage and enqueue, no lock left', async (_what, payload) => {
    const h = harness();
    await h.engine.isStageDeferred(image);
    const before = await snapshot(h.redis, h.prefix);
    await expect(h.engine.dispatchStage(image, payload)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD' });
    await expect(h.engine.enqueue(image, payload)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD' });
    expect(h.executor.calls).toHaveLength(0);
    expect(h.rollbacks).toHaveLength(0);
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
  });

  it('an exception after the lock was taken releases it', async () => {
    const h = harness({
      journal: undefined,
      faultHook: (point) => {
        if (point === 'executor-answered') throw new Error('boom');
      },
    });
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('boom');
    expect(await h.redis.exists(new DeferralStore(h.engine.queue).keys.lock(stageId(image)))).toBe(0);
  });
});

describe('10.10: a sparse scope array is an INVALID_STAGE_REF up front', () => {
  it('dispatchStage, enqueue and cancel refuse [, "a"]', async () => {
    const h = harness();
    // eslint-disable-next-line no-sparse-arrays
    const sparse = { scope: [, 'a'] as unknown as string[], stage: 'image' };
    await expect(h.engine.dispatchStage(sparse, {})).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.enqueue(sparse, {})).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.cancelActiveDispatch(sparse)).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    expect(h.executor.calls).toHaveLength(0);
  });
});

describe('10.11: a journal that throws after the deferral was recorded', () => {
  it('the deferral stands, dispatchStage resolves with journalFailed, hookFailed is emitted', async () => {
    const h = harness({ journal: async () => Promise.reject(new Error('journal down')) });
    const hooks: string[] = [];
    h.engine.on('hookFailed', (e) => hooks.push(`${e.hook}:${(e.error as Error).message}`));
    h.executor.script(image, notSent('no_worker_available'));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ reason: 'no_worker_available', journalFailed: true });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    expect(hooks).toEqual(['journal:journal down']);
  });

  it('in a worker, the job completes: no attempt spent', async () => {
    const h = harness({ journal: async () => Promise.reject(new Error('journal down')) });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'completed');
    expect(failed).toHaveLength(0);
    expect(done[0]!.result).toMatchObject({ journalFailed: true });
  });
});

describe('10.12: bounds and hook failures emit events', () => {
  it('maxCapacityDeferrals: a limit event with outcome failed', async () => {
    const h = harness({ limits: { maxCapacityDeferrals: 1 } });
    const limits: unknown[] = [];
    h.engine.on('limit', (e) => limits.push(e));
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(image, {});
    await h.redis.del(h.engine.deferredStageKey(image));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ limitReached: true });
    expect(limits).toEqual([
      { ref: image, class: 'capacity', reason: 'no_worker_available', deferrals: 1, outcome: 'failed' },
    ]);
  });

  it('maxIdempotentDeferrals: a limit event with outcome completed', async () => {
    const h = harness({ limits: { maxIdempotentDeferrals: 1 } });
    const limits: unknown[] = [];
    h.engine.on('limit', (e) => limits.push(e));
    h.executor.fallback = notSent('already_completed');
    await h.engine.dispatchStage(image, {});
    await h.redis.del(h.engine.deferredStageKey(image));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ completed: true });
    expect(limits).toEqual([
      { ref: image, class: 'idempotent', reason: 'already_completed', deferrals: 1, outcome: 'completed' },
    ]);
  });

  it('a throwing rollback: hookFailed and failed events', async () => {
    const h = harness({ rollback: async () => Promise.reject(new Error('rollback down')) });
    const seen: string[] = [];
    h.engine.on('hookFailed', (e) => seen.push(`hook:${e.hook}`));
    h.engine.on('failed', (e) => seen.push(`failed:${e.reason}`));
    h.executor.script(image, notSent('no_worker_available'));
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('rollback down');
    expect(seen).toEqual(['hook:rollback', 'failed:rollback_error']);
  });
});

describe('10.14: a job added by hand that defers, then throws, does not dispatch twice', () => {
  it('its retry finds it was superseded by its own deferral and stops', async () => {
    let thrown = false;
    const h = harness({
      windows: { capacitySeconds: 0.05, jitter: 0 },
      faultHook: (point) => {
        if (point === 'deferral-recorded' && !thrown) {
          thrown = true;
          throw new Error('lost the reply after the deferral was written');
        }
      },
    });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.queue.add(
      'image',
      { v: 1, scope: image.scope, stage: image.stage, payload: {} },
      { attempts: 3, backoff: { type: 'fixed', delay: 300 } },
    );
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 2, 'the wake-up and the retried job completed');
    expect(done.map((d) => d.result.reason ?? null).sort()).toEqual(['superseded', null].sort());
    expect(h.executor.calls).toHaveLength(2);
  });
});

describe("15.11: the job's own retry options govern it, whichever engine runs it", () => {
  it('a job a producer added with attempts 4 gets 4 on a worker engine configured with 2; its wake-up inherits them', async () => {
    const producer = harness({ retry: { attempts: 4, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } });
    const worker = harness(
      { retry: { attempts: 2, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } },
      { prefix: producer.prefix, queueName: producer.queueName },
    );
    // a capacity answer first (the wake-up inherits the job's options), then real failures only
    worker.executor.script(image, notSent('no_worker_available'));
    worker.executor.fallback = notSent('send_failed');
    const deferred: string[] = [];
    worker.engine.on('deferred', (e) => deferred.push(e.wakeUpJobId));
    await producer.engine.enqueue(image, {});
    const { failed } = watch(worker.engine.createWorker());
    await waitFor(() => failed.some((f) => f.error.name === 'UnrecoverableError'), 'failed for good');
    const wakeUp = await worker.engine.queue.getJob(deferred[0]!);
    expect(wakeUp!.opts.attempts).toBe(4);
    // 1 capacity answer + 4 real failures, not 2
    expect(worker.executor.calls).toHaveLength(5);
    expect(producer.executor.calls).toHaveLength(0);
  });
});
