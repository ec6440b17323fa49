import { harness, notSent, SENT } from './helpers/engine';
import { fast, heldExecutor, latch, watch } from './helpers/jobs';
import { stageId } from '../src/stage-ref';
import { parseLicence, readyJobId } from '../src/job-data';
import { keysUnder, waitFor } from './helpers/redis';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
/** A job added by hand (its id is not the engine's), with the data a dispatch job carries. */
const handData = { v: 1, scope: image.scope, stage: image.stage, payload: { p: 1 } };
const crash = new Error('executor crashed');

/**
 * An engine whose first deferral is written, then its connection drops (the
 * attempt throws before anything after the write: removing the jobs it revoked,
 * the events); wake-ups after 50 ms; a job retries after `backoffMs`.
 */
function dropsAfterFirstDeferral(backoffMs: number) {
  let thrown = false;
  return harness({
    windows: { capacitySeconds: 0.05, jitter: 0 },
    retry: { attempts: 3, backoff: { type: 'fixed', delay: backoffMs } },
    faultHook: (point) => {
      if (point === 'deferral-recorded' && !thrown) {
        thrown = true;
        throw new Error('connection closed after the deferral was written');
      }
    },
  });
}

/** Adds a job by hand under `jobId` and runs it once: it fails (the executor's first answer throws) and waits 60 s. */
async function failedOnceByHand(h: ReturnType<typeof harness>, jobId: string, attempts: number) {
  await h.engine.queue.add('image', handData, { jobId, attempts, backoff: { type: 'fixed', delay: 60_000 } });
  const worker = h.engine.createWorker();
  const { failed } = watch(worker);
  await waitFor(() => failed.length === 1, 'the first attempt failed');
  return worker;
}

describe('a job added by hand under its own id, holding the stage while it waits out its retry', () => {
  it('14.2: a direct call goes on with that job’s retry budget (its licence names the job)', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(image, crash, notSent('no_worker_available'));
    await failedOnceByHand(h, 'by-hand-1', 7);
    expect(await h.engine.queue.getJobState('by-hand-1')).toBe('delayed');
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    const r = await h.engine.dispatchStage(image, { p: 1 });
    expect(r).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
    expect(wakeUps).toHaveLength(1);
    const wakeUp = await h.engine.queue.getJob(wakeUps[0]!);
    // the wake-up carries the budget of the job whose chain it continues, not the engine's default
    expect(wakeUp?.opts.attempts).toBe(7);
  });

  it('14.2: enqueue answers pending with that job’s id (no second job for the stage)', async () => {
    const h = harness();
    h.executor.script(image, crash);
    const worker = await failedOnceByHand(h, 'by-hand-2', 3);
    await worker.close();
    expect(await h.engine.enqueue(image, { p: 1 })).toMatchObject({
      added: false,
      reason: 'pending',
      jobId: 'by-hand-2',
    });
    expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'active')).toEqual({ wait: 0, delayed: 1, active: 0 });
  });
});

describe('a job whose licence another attempt revoked, and that was not removed', () => {
  it('14.2: does not dispatch the stage again when it runs (it was marked superseded)', async () => {
    // the direct call's deferral is written, then its connection drops before the revoked job is removed
    const h = dropsAfterFirstDeferral(1_500);
    // the enqueued job fails (it holds the stage while it waits 1.5 s); a direct call defers;
    // the wake-up dispatches; then the enqueued job's retry runs
    h.executor.script(image, crash, notSent('no_worker_available'));
    const { jobId } = await h.engine.enqueue(image, { p: 1 });
    const worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the enqueued job failed once');
    await expect(h.engine.dispatchStage(image, { p: 1 })).rejects.toThrow(/connection closed/);
    expect(await h.engine.queue.getJobState(jobId!)).toBe('delayed');
    await waitFor(() => done.length === 2, 'the wake-up and the retried job completed', 20_000);
    const sent = h.executor.calls.filter((c) => c.result === SENT);
    expect(sent).toHaveLength(1);
    expect(done.find((d) => d.id === jobId)?.result).toMatchObject({
      dispatched: false,
      reason: 'superseded',
      retryable: false,
    });
  });
});

describe('a job added by hand whose licence another attempt revoked, and that was not removed', () => {
  it('14.2: does not dispatch the stage again when it runs after the wake-up dispatched (it was marked superseded; no deduplication key speaks for it)', async () => {
    const h = dropsAfterFirstDeferral(1_500);
    h.executor.script(image, crash, notSent('no_worker_available'));
    await h.engine.queue.add('image', handData, {
      jobId: 'hand-9',
      attempts: 3,
      backoff: { type: 'fixed', delay: 1_500 },
    });
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the job added by hand failed once');
    await expect(h.engine.dispatchStage(image, { p: 1 })).rejects.toThrow(/connection closed/);
    expect(await h.engine.queue.getJobState('hand-9')).toBe('delayed');
    await waitFor(() => done.length === 2, 'the wake-up and the retried job completed', 20_000);
    expect(h.executor.calls.filter((c) => c.result === SENT)).toHaveLength(1);
    expect(done.find((d) => d.id === 'hand-9')?.result).toMatchObject({ dispatched: false, reason: 'superseded' });
  });
});

describe('an enqueued job that deferred, then threw (it is retried)', () => {
  it('14.2: gave up its deduplication: an enqueue after the deferral ended adds a new job', async () => {
    const h = dropsAfterFirstDeferral(60_000);
    h.executor.script(image, notSent('no_worker_available'));
    const first = await h.engine.enqueue(image, { p: 1 });
    const worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 1 && done.length === 1, 'the job threw; the wake-up dispatched');
    // the first job waits out its retry (60 s) and will stop as superseded: it must not absorb a new enqueue
    const again = await h.engine.enqueue(image, { p: 2 });
    expect(again).toMatchObject({ added: true });
    expect(again.jobId).not.toBe(first.jobId);
    await waitFor(() => done.length === 2, 'the new job dispatched');
    expect(h.executor.calls.map((c) => c.payload)).toEqual([{ p: 1 }, { p: 1 }, { p: 2 }]);
  });
});

describe('a dispatch cancelled from another host while its executor goes on', () => {
  it('14.2: keeps the stage in flight (its cancelled lock is renewed) until the executor ends: no second dispatch', async () => {
    const a = harness({ lockMs: 1000 });
    const b = harness({ lockMs: 1000 }, { prefix: a.prefix, queueName: a.queueName });
    const release = latch<void>();
    a.executor.script(image, async () => {
      await release.opened; // an executor that does not stop at its signal
      return SENT;
    });
    const first = a.engine.dispatchStage(image, { p: 1 });
    await waitFor(() => a.executor.calls.length === 1, 'the executor to start');
    const cancelled = await b.engine.cancelActiveDispatch(image);
    expect(cancelled).toMatchObject({ inFlight: true });
    // for three lock lifetimes after the cancel, the other host finds the stage in flight
    const since = Date.now();
    const answers: (string | null)[] = [];
    await waitFor(
      async () => {
        answers.push((await b.engine.dispatchStage(image, { p: 2 })).reason);
        return Date.now() - since > 3_000;
      },
      'three lock lifetimes',
      20_000,
    );
    expect(new Set(answers)).toEqual(new Set(['dispatch_in_flight']));
    expect(b.executor.calls).toHaveLength(0);
    release.open();
    expect(await first).toMatchObject({ dispatched: true, cancelled: true });
  });
});

/** How many stages wait in the queue's wait indexes (wakeDeferred's, one per stage kind). */
async function waits(h: ReturnType<typeof harness>): Promise<number> {
  const keys = (await keysUnder(h.redis, `${h.prefix}:${h.queueName}`)).filter((k) => k.includes(':sd:wq:'));
  return (await Promise.all(keys.map((k) => h.redis.zcard(k)))).reduce((a, b) => a + b, 0);
}
const NO = notSent('no_worker_available');

describe("11.1: a chain's end leaves nothing in the wait index (wakeDeferred's)", () => {
  it.each(['cancel', 'clear'] as const)(
    '11.1: a %s of a capacity-deferred stage removes it from its kind’s wait index',
    async (how) => {
      const h = harness();
      h.executor.fallback = NO;
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
      expect(await waits(h)).toBe(1);
      if (how === 'cancel') expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ hadDeferral: true });
      else expect(await h.engine.clearDeferrals(image.scope)).toBe(1);
      expect(await waits(h)).toBe(0);
    },
  );

  it('11.1: a wake-up that fails for good (its chain ends in a real failure) removes the stage from its kind’s wait index', async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 }, retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, NO, crash);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    expect(await waits(h)).toBe(1);
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the wake-up failed for good');
    expect(await waits(h)).toBe(0);
  });
});

describe("11.1: a chain's end by a success leaves nothing in the wait index", () => {
  it('11.1: a success of a capacity-deferred stage (its deferral ended by hand, its wake-up still licensed) removes it from its kind’s wait index', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, SENT);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    expect(await waits(h)).toBe(1);
    await h.redis.del(h.engine.deferredStageKey(image));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
    expect(await waits(h)).toBe(0);
  });
});

describe('11.1: a stage woken early that defers again (its chain goes on)', () => {
  it('11.1: waits in the wait index again: a second wakeDeferred wakes it', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, NO, SENT);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the woken wake-up ran (capacity again)');
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    expect((await h.engine.listDeferred())[0]!.deferrals).toBe(2);
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
    await waitFor(() => done.length === 2, 'the second woken wake-up ran');
    expect(done[1]!.result).toMatchObject({ dispatched: true });
  });
});

describe('11.1: a stage whose chain has no wait-index entry (it began before the per-kind wait index: an upgrade)', () => {
  it('11.1: its next capacity deferral (the chain goes on) puts it back: wakeDeferred finds it', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, NO);
    const first = await h.engine.dispatchStage(image, {});
    expect(first).toMatchObject({ until: expect.any(Number) });
    await h.redis.zrem(`${h.prefix}:${h.queueName}:sd:wq:image`, stageId(image));
    expect(await waits(h)).toBe(0);
    // an operator promotes the wake-up (Bull Board's "promote"): it runs now, capacity again
    const [d] = await h.engine.listDeferred();
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.promote();
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the promoted wake-up ran');
    expect((await h.engine.listDeferred())[0]!.deferrals).toBe(2);
    expect(await waits(h)).toBe(1);
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
  });
});

/** An `image` and a `video` stage of one scene, each capacity-deferred for 60 s. */
async function twoKindsDeferred() {
  const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
  h.executor.fallback = NO;
  const video = { scope: image.scope, stage: 'video' };
  for (const s of [image, video]) await h.engine.dispatchStage(s, {});
  return { h, video };
}

describe('11.1: a queue upgraded from the version with a queue-wide wait index (sd:wq) and no set of kinds (sd:wqk)', () => {
  it('11.1: wakeDeferred without a stage kind moves the kinds in, wakes their stages, and deletes the queue-wide index', async () => {
    const { h, video } = await twoKindsDeferred();
    // what that version left: the per-kind indexes, the queue-wide one, no set of kinds
    const base = `${h.prefix}:${h.queueName}:`;
    await h.redis.del(`${base}sd:wqk`);
    await h.redis.zadd(`${base}sd:wq`, 1, stageId(image), 2, stageId(video));
    expect((await h.engine.wakeDeferred({ limit: 10 })).woken).toEqual([image, video]);
    expect(await h.redis.exists(`${base}sd:wq`)).toBe(0);
  });
});

describe('11.1: the set of stage kinds with a wait index (sd:wqk)', () => {
  it('11.1: a kind whose chains all ended leaves it at the next wakeDeferred without a kind; a kind still waiting stays', async () => {
    const { h, video } = await twoKindsDeferred();
    const kinds = `${h.prefix}:${h.queueName}:sd:wqk`;
    expect((await h.redis.smembers(kinds)).sort()).toEqual(['image', 'video']);
    await h.engine.cancelActiveDispatch(image);
    expect((await h.engine.wakeDeferred({ stage: 'nothing-of-that-kind' })).woken).toEqual([]);
    expect((await h.redis.smembers(kinds)).sort()).toEqual(['image', 'video']);
    expect((await h.engine.wakeDeferred({ scope: ['elsewhere'] })).woken).toEqual([]);
    expect((await h.engine.wakeDeferred({ limit: 1 })).woken).toEqual([video]);
    expect(await h.redis.smembers(kinds)).toEqual(['video']);
  });
});

describe('a cancel while a job added by hand (kept when it completes) is in flight', () => {
  it('7.cancel: marks that job, so a retry of it by hand after it completed does not dispatch the cancelled stage', async () => {
    const h = harness();
    const held = heldExecutor(SENT);
    h.executor.script(image, held.executor);
    await h.engine.queue.add('image', handData, { jobId: 'kept-1', removeOnComplete: false });
    const { done } = watch(h.engine.createWorker());
    await held.running;
    expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
    held.release();
    await waitFor(() => done.length === 1, 'the job completed');
    expect(done[0]!.result).toMatchObject({ dispatched: true, cancelled: true });
    await (await h.engine.queue.getJob('kept-1'))!.retry('completed');
    await waitFor(() => done.length === 2, 'the job retried by hand completed');
    expect(done[1]!.result).toMatchObject({ dispatched: false });
    expect(h.executor.calls).toHaveLength(1);
  });
});

describe('a cancel while the enqueued job is in flight', () => {
  it('7.cancel: frees the stage’s deduplication: a producer’s deduplicating add after it (BullMQ’s add, as the Python producer sends it) adds a new job, not absorbed by the cancelled one', async () => {
    const h = harness();
    const held = heldExecutor(SENT);
    h.executor.script(image, held.executor, SENT);
    try {
      const first = await h.engine.enqueue(image, { p: 1 });
      const { done } = watch(h.engine.createWorker());
      await held.running;
      expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
      const sid = stageId(image);
      const id = readyJobId(sid);
      await h.engine.queue.add(
        'image',
        { ...handData, payload: { p: 2 } },
        {
          jobId: id,
          deduplication: { id: sid },
          attempts: 3,
        },
      );
      expect(id).not.toBe(first.jobId);
      expect(await h.engine.queue.getJobState(id)).not.toBe('unknown');
      held.release();
      await waitFor(() => done.length === 2, 'both jobs completed');
      expect(h.executor.calls.map((c) => c.payload)).toEqual([{ p: 1 }, { p: 2 }]);
    } finally {
      held.release();
    }
  });

  it('7.cancel: leaves alone a job added by hand under its own id with the stage’s deduplication id (only the engine’s own jobs are removed)', async () => {
    const h = harness();
    await h.engine.queue.add('image', handData, {
      jobId: 'mine-1',
      delay: 60_000,
      deduplication: { id: stageId(image) },
    });
    expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ removedJobs: 0 });
    expect(await h.engine.queue.getJobState('mine-1')).toBe('delayed');
  });
});

describe('a job added by hand that fails for good', () => {
  it.each([
    ['true', true],
    ['0', 0],
    ['{ count: 0 }', { count: 0 }],
    ['{ age: 0 }', { age: 0 }],
  ] as const)(
    '7.fail: with removeOnFail %s (BullMQ removes it as it fails) leaves no failed-job record',
    async (_, rof) => {
      const h = harness({ retry: { attempts: 1, backoff: fast } });
      h.executor.script(image, crash);
      await h.engine.queue.add('image', handData, { jobId: 'gone-1', attempts: 1, removeOnFail: rof });
      const { failed } = watch(h.engine.createWorker());
      await waitFor(() => failed.length === 1, 'the job failed for good');
      expect(await h.engine.queue.getJob('gone-1')).toBeUndefined();
      expect(await h.redis.zrange(`${h.prefix}:${h.queueName}:sd:licences`, '0', '-1')).toEqual([]);
    },
  );

  it.each([
    ['5', 5],
    ['{ age: 3600 }', { age: 3600 }],
    ['{ age: 0, limit: 0 } (BullMQ removes none)', { age: 0, limit: 0 }],
  ] as const)(
    '7.cancel: with removeOnFail %s (kept a while) is recorded: a cancel reaches it, a retry of it by hand does not dispatch',
    async (_, rof) => {
      const h = harness({ retry: { attempts: 1, backoff: fast } });
      h.executor.script(image, crash, SENT);
      await h.engine.queue.add('image', handData, { jobId: 'kept-2', attempts: 1, removeOnFail: rof });
      const { done, failed } = watch(h.engine.createWorker());
      await waitFor(() => failed.length === 1, 'the job failed for good');
      expect(await h.redis.zrange(`${h.prefix}:${h.queueName}:sd:licences`, '0', '-1')).toEqual([
        `${stageId(image)}@j.kept-2?`,
      ]);
      await h.engine.cancelActiveDispatch(image);
      await (await h.engine.queue.getJob('kept-2'))!.retry('failed');
      await waitFor(() => done.length === 1, 'the job retried by hand completed');
      expect(done[0]!.result).toMatchObject({ dispatched: false });
      expect(h.executor.calls).toHaveLength(1);
    },
  );
});

describe('10.clock: a host whose clock runs ahead of Redis records its lead on every batch (sd:lead, PX 60 s)', () => {
  it('10.clock: its start-up record gone (its TTL ran out), a batch writes it again; a larger lead of the fleet is kept', async () => {
    const h = harness();
    // a host that runs a Worker (the engine's processor in one of its own): it promotes by its clock
    expect(typeof h.engine.processor).toBe('function');
    await h.engine.waitUntilReady();
    const lead = `${h.prefix}:${h.queueName}:sd:lead`;
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() + 6000);
    try {
      await h.redis.del(lead);
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      // about 6 s (the host's lead, less the time a request takes)
      expect(Number(await h.redis.get(lead))).toBeGreaterThan(5000);
      expect(await h.redis.pttl(lead)).toBeGreaterThan(0);
      // another host's larger lead stands
      await h.redis.set(lead, 9000, 'PX', 60_000);
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      expect(await h.redis.get(lead)).toBe('9000');
    } finally {
      spy.mockRestore();
    }
  });

  it('10.clock: review 34, fixed: a host that runs no Worker (a producer, the ops CLI) records no lead: it promotes nothing', async () => {
    const h = harness();
    const lead = `${h.prefix}:${h.queueName}:sd:lead`;
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() + 6000);
    try {
      await h.engine.waitUntilReady();
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      expect(await h.redis.exists(lead)).toBe(0);
      // then it starts a Worker: its lead is recorded before the Worker fetches
      expect(typeof h.engine.processor).toBe('function');
      await waitFor(async () => Number(await h.redis.get(lead)) > 5000, 'the lead recorded');
    } finally {
      spy.mockRestore();
    }
  });
});

describe('a job (not a wake-up) that holds the licence after a real failure keeps the chain it ran in', () => {
  it('14.2: its retry’s capacity deferral goes on with that chain (the deferrals before the failure count)', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 }, retry: { attempts: 3, backoff: fast } });
    h.executor.script(image, NO, crash, NO);
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    // a deferral: its wake-up holds the licence (a chain of one capacity deferral)
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    await h.redis.del(h.engine.deferredStageKey(image));
    // a job added by hand runs in that chain, fails (it takes the licence), and its retry defers
    await h.engine.queue.add('image', handData, { jobId: 'chain-1', attempts: 3, backoff: fast });
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => wakeUps.length === 2, 'the retry deferred');
    expect(failed).toHaveLength(1);
    expect(parseLicence(wakeUps[1]!)!.chain).toEqual({ capacity: 2, idempotent: 0, failures: 1 });
  });
});

describe('a job retried by hand after failing for good', () => {
  it('14.2: gets one fresh budget, not one per attempt: it fails for good again after its attempts', async () => {
    const h = harness({ retry: { attempts: 2, backoff: fast } });
    h.executor.script(image, crash, crash, crash, crash, crash, crash);
    await h.engine.queue.add('image', handData, { jobId: 'again-1', attempts: 2, backoff: fast });
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 2, 'failed for good (2 attempts)');
    expect(await h.engine.queue.getJobState('again-1')).toBe('failed');
    await (await h.engine.queue.getJob('again-1'))!.retry('failed');
    // (BullMQ's attempts are spent: the engine retries the second of the two itself, quietly)
    await waitFor(
      async () => h.executor.calls.length >= 4 && (await h.engine.queue.getJobState('again-1')) === 'failed',
      'failed for good again after 2 more attempts',
    );
    expect(h.executor.calls).toHaveLength(4);
  });
});

describe('a job added for the stage under its deduplication id while a wake-up held the stage (a producer that skipped the probe)', () => {
  it('14.2: is marked superseded when the wake-up dispatches the stage, and does not dispatch it again', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, SENT);
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: false });
    // the probe would answer 'pending'; this producer adds the job anyway (its deduplication key is free)
    const late = await h.engine.queue.add('image', handData, {
      jobId: readyJobId(stageId(image)),
      deduplication: { id: stageId(image) },
      attempts: 3,
      delay: 120_000,
    });
    expect(await h.engine.queue.getJobState(late.id!)).toBe('delayed');
    const { done } = watch(h.engine.createWorker());
    await (await h.engine.queue.getJob(wakeUps[0]!))!.promote();
    await waitFor(() => done.length === 1, 'the wake-up dispatched the stage');
    await (await h.engine.queue.getJob(late.id!))!.promote();
    await waitFor(() => done.length === 2, 'the late job ran');
    expect(done[1]).toMatchObject({ id: late.id, result: { dispatched: false, reason: 'superseded' } });
    expect(h.executor.calls.filter((c) => c.result === SENT)).toHaveLength(1);
  });
});
