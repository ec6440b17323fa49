import { harness, notSent, SENT } from './helpers/engine';
import { latch, watch } from './helpers/jobs';
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

describe("11.1: a chain's end leaves nothing in the wait index (wakeDeferred's)", () => {
  it.each(['cancel', 'clear'] as const)(
    '11.1: a %s of a capacity-deferred stage removes it from its kind’s wait index',
    async (how) => {
      const h = harness();
      h.executor.fallback = notSent('no_worker_available');
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
      const waits = async () => {
        const keys = (await keysUnder(h.redis, `${h.prefix}:${h.queueName}`)).filter((k) => k.includes(':sd:wq:'));
        return (await Promise.all(keys.map((k) => h.redis.zcard(k)))).reduce((a, b) => a + b, 0);
      };
      expect(await waits()).toBe(1);
      if (how === 'cancel') expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ hadDeferral: true });
      else expect(await h.engine.clearDeferrals(image.scope)).toBe(1);
      expect(await waits()).toBe(0);
    },
  );
});
