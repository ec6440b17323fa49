import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { fast, watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';

/** Paths that held up when tried (these pass). */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C17: operations on a stage whose licence another job holds', () => {
  it('listDeferred / clearDeferrals / cancel on a stage whose job failed for good (its record `<id>?`)', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, new Error('down'));
    const job = await addProducerJob(h.engine.queue, image, { attempts: 1 });
    const { failed, done } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'failed for good');
    expect(await h.engine.listDeferred()).toEqual([]);
    expect(await h.engine.clearDeferrals(['book-1'])).toBe(0);
    // enqueue sees nothing pending; the failed job is kept as the record
    expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ removedJobs: 0 });
    await (await h.engine.queue.getJob(job.id!))!.retry('failed');
    await waitFor(() => done.length === 1, 'retried');
    expect(done[0]!.result).toMatchObject({ cancelled: true });
  });

  it('Promote all (queue.promoteJobs) while a wake-up is deferred wakes it once, no loop', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    const { done } = watch(h.engine.createWorker());
    await h.engine.queue.promoteJobs();
    await waitFor(() => done.length === 1, 'woken');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(2);
  });

  // (a review changed its end: the retried job, delayed while the direct dispatch ran, was
  // retried before that dispatch sent the stage and ended the chain, so it is superseded: it
  // used to send the stage a second time)
  it('a failed job retried by hand while another dispatch is in flight is delayed, then superseded when that dispatch sends the stage (sent once)', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast }, inFlightRetryMs: 50 });
    h.executor.script(image, new Error('down'));
    const { jobId } = await h.engine.enqueue(image, {});
    const { failed, done } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'failed');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    h.executor.script(image, async () => {
      await held;
      return SENT;
    });
    const direct = h.engine.dispatchStage(image, {});
    await waitFor(() => h.executor.calls.length === 2, 'in flight');
    await (await h.engine.queue.getJob(jobId!))!.retry('failed');
    await waitFor(async () => (await h.engine.queue.getJob(jobId!))!.attemptsStarted >= 3, 'delayed in flight');
    release();
    await direct;
    await waitFor(() => done.length === 1, 'the retried job ran');
    expect(done[0]!.result).toMatchObject({ dispatched: false, reason: 'superseded' });
    expect(h.executor.calls).toHaveLength(2);
  });
});
