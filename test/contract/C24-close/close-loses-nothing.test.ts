import { Worker } from 'bullmq';
import { stageId, type StageRef } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { harness, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { connect, waitFor } from '../../helpers/redis';
import { blocking } from '../../helpers/attempts';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C24: engine.close() spends no attempt and loses nothing', () => {
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

describe('C24: close() keeps renewing the locks of running executors, and the processor refuses new jobs', () => {
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
