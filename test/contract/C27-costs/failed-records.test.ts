import { harness, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { fast, watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import { keptFor } from '../../helpers/visible';

/**
 * The engine records each job that fails for good (a cancel reaches it, a retry by hand of it
 * starts afresh). A record goes
 * only with a cancel or a retry by hand of its job (or an `enqueue` of the
 * stage, which drops records whose job is gone): a success keeps them all,
 * and nothing notices BullMQ removing the failed job (removeOnFail, clean,
 * Remove in Bull Board). Contract: "nothing is kept for a stage that is not
 * deferred, in flight, waiting out a retry, or failed for good".
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C27: failed-job records whose job is gone', () => {
  it('a job with removeOnFail fails for good, then the stage is dispatched: nothing of it is left', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, new Error('down'), SENT);
    await addProducerJob(h.engine.queue, image, { attempts: 1, removeOnFail: true });
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'failed for good (and removed by BullMQ)');
    expect(await h.engine.queue.getJobCounts('failed')).toMatchObject({ failed: 0 });
    // the host's tick dispatches the stage: it is done
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    expect(await keptFor(h, image)).toEqual([]);
  });

  it('failed jobs cleaned from the queue (Bull Board "Clean failed") leave no record behind', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, new Error('down #1'), new Error('down #2'), new Error('down #3'), SENT);
    const { failed } = watch(h.engine.createWorker());
    for (let i = 1; i <= 3; i++) {
      await h.engine.enqueue(image, {});
      await waitFor(() => failed.length === i, `failure ${i}`);
    }
    await h.engine.queue.clean(0, 100, 'failed');
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    expect(await keptFor(h, image)).toEqual([]);
  });

  it('an enqueue of a stage with many failed jobs on record costs a bounded number of round trips', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    // 40 failures for good, each a record the stage's every enqueue then looks up one by one
    h.executor.fallback = { dispatched: false, jobs: 0, reason: 'send_failed' };
    const worker = h.engine.createWorker({ concurrency: 1 });
    const { failed } = watch(worker);
    for (let i = 1; i <= 40; i++) {
      await h.engine.enqueue(image, {});
      await waitFor(() => failed.length === i, `failure ${i}`);
    }
    await worker.close();
    expect(await h.engine.queue.getJobCounts('failed')).toMatchObject({ failed: 40 });
    const lookups = jest.spyOn(h.engine.queue, 'getJobState');
    await h.engine.enqueue(image, {});
    // README, Costs: "enqueue of a stage with nothing pending: 2 (probe, BullMQ add)"
    expect(lookups.mock.calls.length).toBeLessThanOrEqual(2);
  });
});
