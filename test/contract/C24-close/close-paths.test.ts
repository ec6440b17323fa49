import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { DispatchContext, StageRef } from '../../../src';
import { Worker } from 'bullmq';
import { redisOptions } from '../../helpers/redis';
import { fast, latch, sleep } from '../../helpers/jobs';

/** Contract: close() spends no attempt and loses nothing. */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** A rollback that honours its signal, as one using fetch(url, { signal }) would. */
function abortableRollback() {
  const started = latch<DispatchContext>();
  const fn = async (_ref: StageRef, _reason: string, ctx?: DispatchContext) => {
    started.open(ctx!);
    await new Promise((_, reject) => {
      if (ctx!.signal.aborted) reject(ctx!.signal.reason);
      ctx!.signal.addEventListener('abort', () => reject(ctx!.signal.reason));
    });
  };
  return { fn, started: started.opened };
}

describe('C24: engine.close() while the rollback runs', () => {
  it('a rollback aborted by close() must not spend an attempt (attempts: 1 -> the job fails for good)', async () => {
    const rb = abortableRollback();
    const a = harness({ retry: { attempts: 1, backoff: fast }, rollback: rb.fn as never });
    a.executor.script(image, notSent('no_worker_available'));
    const { jobId } = await a.engine.enqueue(image, {});
    a.engine.createWorker();
    await rb.started;
    await a.engine.close();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const job = (await b.engine.queue.getJob(jobId!))!;
    expect(await job.getState()).not.toBe('failed');
    expect(job.attemptsMade).toBe(0);
  });

  it('an executor that answers send_failed once its signal is aborted by close() must not spend an attempt', async () => {
    const started = latch();
    const a = harness({
      retry: { attempts: 1, backoff: fast },
      executor: async (_r, _p, ctx) => {
        started.open();
        await new Promise((r) => ctx.signal.addEventListener('abort', r));
        // the HTTP call the executor made was aborted: it reports nothing sent
        return notSent('send_failed');
      },
    });
    const { jobId } = await a.engine.enqueue(image, {});
    a.engine.createWorker();
    await started.opened;
    await a.engine.close();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const job = (await b.engine.queue.getJob(jobId!))!;
    expect(await job.getState()).not.toBe('failed');
    expect(job.attemptsMade).toBe(0);
  });
});

describe('C24: close() called twice', () => {
  it('the second close() must not resolve before the first has finished (executor still running)', async () => {
    const started = latch();
    const release = latch();
    const a = harness({
      executor: async () => {
        started.open();
        await release.opened; // ignores the signal: a slow but well-behaved executor
        return SENT;
      },
    });
    const dispatched = a.engine.dispatchStage(image, {});
    await started.opened;
    let firstDone = false;
    let secondDone = false;
    const first = a.engine.close().then(() => (firstDone = true));
    const second = a.engine.close().then(() => (secondDone = true));
    // give a wrongly early second close() every chance to resolve
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    const earlyEither = firstDone || secondDone;
    release.open();
    await dispatched;
    await Promise.all([first, second]);
    expect(earlyEither).toBe(false);
  });
});

describe("C24: a user's own Worker on a closed engine's processor", () => {
  it('does not spin the job through active -> delayed(0) -> wait hundreds of times a second', async () => {
    const h = harness();
    const look = harness({}, { prefix: h.prefix, queueName: h.queueName });
    const { jobId } = await h.engine.enqueue(image, {});
    await h.engine.close();
    const worker = new Worker(h.queueName, h.engine.processor, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
    });
    try {
      await waitFor(async () => ((await look.engine.queue.getJob(jobId!))?.attemptsStarted ?? 0) > 0, 'picked');
      await sleep(1000);
      const job = (await look.engine.queue.getJob(jobId!))!;
      // each cycle is a moveToActive + moveToDelayed + promote: a hot loop on Redis
      expect(job.attemptsStarted).toBeLessThan(20);
    } finally {
      await worker.close();
    }
  });
});
