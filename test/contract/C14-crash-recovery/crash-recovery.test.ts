import { Worker } from 'bullmq';
import { stageId } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { expectUnwritten, harness, notSent, SENT, snapshot } from '../../helpers/engine';
import { keptFor, probe } from '../../helpers/visible';
import { client, waitFor } from '../../helpers/redis';

const ref = { scope: ['book', 'ch', 'sc'], stage: 'image' };

const begin = (store: DeferralStore, ownJobId: string, lockMs = 60_000) =>
  store.begin({ sid: stageId(ref), ownJobId, lockMs, wakeUp: false, skewToleranceMs: 1000 });
/** Jobs J and K exist, in wait (a token-less begin of a job that is gone or finished stops as `gone`). */
const addJobs = (h: ReturnType<typeof harness>) =>
  Promise.all(['J', 'K'].map((jobId) => h.engine.queue.add(ref.stage, {}, { jobId })));

/**
 * A worker that dies (or freezes) mid-attempt leaves the stage's lock behind.
 * BullMQ redelivers the job once its own job lock lapses, which may be long
 * before the engine's lock does, and the frozen worker may still resume: the
 * redelivered job waits like anyone else until the lock is released or expires.
 */
describe('C14: a job redelivered after its worker died or froze', () => {
  it("waits while its earlier attempt's lock is live (no takeover), then runs once it expires", async () => {
    const h = harness({ lockMs: 60_000 });
    const store = new DeferralStore(h.engine.queue);
    await addJobs(h);
    // the crashed attempt of job J
    const first = await begin(store, 'J');
    expect(first.kind).toBe('locked');
    expect((await h.engine.dispatchStage(ref, {})).reason).toBe('dispatch_in_flight');
    expect((await begin(store, 'K')).kind).toBe('in_flight');
    // the redelivery of J does not take the live lock over
    expect((await begin(store, 'J')).kind).toBe('in_flight');
    // once the lock expired, it runs, with a larger fencing token
    await h.redis.pexpire(store.keys.lock(stageId(ref)), 1);
    // (each try that finds the lock gone takes it: the first 'locked' answer ends the wait)
    let again: Awaited<ReturnType<typeof begin>> | undefined;
    await waitFor(async () => (again = await begin(store, 'J')).kind === 'locked', 'the lock to expire');
    again = again!;
    expect(again.kind === 'locked' && first.kind === 'locked' && again.fencingToken > first.fencingToken).toBe(true);
  });

  it('completes as cancelled when its crashed attempt was cancelled in flight', async () => {
    const h = harness({ lockMs: 60_000 });
    const store = new DeferralStore(h.engine.queue);
    await addJobs(h);
    await begin(store, 'J');
    await h.engine.cancelActiveDispatch(ref);
    expect((await begin(store, 'J')).kind).toBe('cancelled');
    // the cancelled attempt's lock stays until it ends or expires: it may still be running
    expect(await probe(h, ref)).toEqual({ kind: 'in_flight' });
    expect((await h.engine.dispatchStage(ref, {})).reason).toBe('dispatch_in_flight');
  });
});

describe('C14: a worker that resumes with a job it no longer holds (frozen between fetch and begin)', () => {
  it('its begin stops as gone, writing nothing, once the job was removed or finished elsewhere (with or without a BullMQ token)', async () => {
    const h = harness({ lockMs: 60_000 });
    const store = new DeferralStore(h.engine.queue);
    const sid = stageId(ref);
    // never there (removed by removeOnComplete, or by hand)
    expect((await begin(store, 'J')).kind).toBe('gone');
    // finished and kept: completed by another worker, whose fetch took it first
    await h.engine.queue.add(ref.stage, {}, { jobId: 'K', removeOnComplete: false });
    const other = new Worker(h.queueName, null, {
      connection: client({ maxRetriesPerRequest: null }),
      prefix: h.prefix,
      autorun: false,
    });
    try {
      const job = (await other.getNextJob('other-token', { block: false }))!;
      expect(job.id).toBe('K');
      await job.moveToCompleted('done elsewhere', 'other-token', false);
      // from here on the begins write nothing under the prefix (no lock, no fencing token)
      const before = await snapshot(h.redis, h.prefix);
      // the frozen worker's begin, with the BullMQ token it was handed before the other fetch
      const late = await store.begin({
        sid,
        ownJobId: 'K',
        lockMs: 60_000,
        wakeUp: false,
        skewToleranceMs: 1000,
        bullToken: 'frozen-token',
      });
      expect(late.kind).toBe('gone');
      // and a caller that gave no token (it cannot say whose the lock is): the job has finished
      expect((await begin(store, 'K')).kind).toBe('gone');
      // and the job that was never there, once more
      expect((await begin(store, 'J')).kind).toBe('gone');
      expectUnwritten(before, await snapshot(h.redis, h.prefix));
    } finally {
      await other.close();
    }
    // nothing of the stage is kept, and no job J was made
    expect(await keptFor(h, ref)).toEqual([]);
    expect(await h.engine.queue.getJobState('J')).toBe('unknown');
    // the first dispatch of the stage is not in flight behind a lock of the begins
    expect((await h.engine.dispatchStage(ref, {})).dispatched).toBe(true);
  });
});

describe('C14: a lock that expired while the executor ran (e.g. across a failover)', () => {
  it('records no deferral, and the job tries again instead of being dropped', async () => {
    const h = harness({ inFlightRetryMs: 20 });
    const store = new DeferralStore(h.engine.queue);
    h.executor.script(
      ref,
      async () => {
        await h.redis.del(store.keys.lock(stageId(ref)));
        return notSent('no_worker_available');
      },
      SENT,
    );
    await h.engine.enqueue(ref, {});
    const worker = h.engine.createWorker();
    const done: unknown[] = [];
    worker.on('completed', (_j, r) => done.push(r));
    await waitFor(() => done.length === 1, 'job completed after trying again');
    expect(done[0]).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(2);
    expect(h.journal).toHaveLength(0);
    expect(await h.engine.queue.getJobCounts('delayed', 'failed')).toEqual({ delayed: 0, failed: 0 });
  });
});
