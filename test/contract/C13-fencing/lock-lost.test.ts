import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { DeferralStore } from '../../../src/deferral-store';
import { stageId, type DispatchContext, type StageRef } from '../../../src';
import { fast, latch, watch } from '../../helpers/jobs';

/**
 * A worker frozen (GC pause, a partition from Redis) past lockMs: its lock
 * lapses (simulated here by deleting it, which is what PX expiry does), and
 * another engine takes the stage. The frozen attempt then comes back.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C13: the attempt that lost its lock', () => {
  it("its late success does not revoke the deferral recorded by the lock's new holder", async () => {
    const started = latch<DispatchContext>();
    const finish = latch();
    const a = harness({
      lockMs: 1000,
      executor: async (_r, _p, ctx) => {
        started.open(ctx);
        await finish.opened; // frozen; ignores its signal
        return SENT;
      },
    });
    const b = harness({ lockMs: 1000 }, { prefix: a.prefix, queueName: a.queueName });
    const lock = new DeferralStore(a.engine.queue).keys.lock(stageId(image));
    const late = a.engine.dispatchStage(image, {});
    await started.opened;
    await a.redis.del(lock); // A's lock lapsed while it was frozen
    b.executor.script(image, notSent('no_worker_available'));
    expect((await b.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    const [d] = await b.engine.listDeferred();
    expect(d).toBeDefined();
    finish.open();
    const r = await late;
    expect(r.dispatched).toBe(true); // A's executor did send it
    // but the late release is applied as if A still held the stage: B's licence is revoked and its
    // wake-up removed, leaving a marker with no wake-up (listDeferred no longer shows it)
    expect(await b.engine.listDeferred()).toHaveLength(1);
    expect(await b.engine.queue.getJob(d!.wakeUpJobId)).toBeDefined();
  });

  it('an executor aborted because the lock was lost does not spend an attempt (the DEFER path delays instead)', async () => {
    const a = harness({
      lockMs: 1000,
      retry: { attempts: 1, backoff: fast },
      executor: async (_r, _p, ctx) => {
        await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
        return SENT;
      },
    });
    const lock = new DeferralStore(a.engine.queue).keys.lock(stageId(image));
    const { jobId } = await a.engine.enqueue(image, {});
    const { failed } = watch(a.engine.createWorker());
    await waitFor(async () => (await a.redis.exists(lock)) === 1, 'the lock taken');
    await a.redis.del(lock); // lapsed
    // the next renewal finds it lost and aborts the executor: the job goes back (delayed), no attempt spent
    await waitFor(async () => (await a.engine.queue.getJobState(jobId!)) === 'delayed', 'the job sent back');
    expect(failed.map((f) => f.error.message)).toEqual([]);
    expect(await a.engine.queue.getJobState(jobId!)).not.toBe('failed');
  });
});
