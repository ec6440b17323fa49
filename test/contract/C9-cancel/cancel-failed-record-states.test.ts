import { type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import { waitFor } from '../../helpers/redis';
import { blocking, failedJob, failingJob } from '../../helpers/attempts';

/**
 * Contract: a cancel keeps a failed job as the record of its failure and removes a job that
 * would still run. A failed-job record whose job BullMQ no longer holds as waiting (it completed,
 * or its state cannot be read) is not a job that would still run: the cancel leaves it.
 */
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C9: a cancel leaves a failed-job record whose job will not run', () => {
  it('a kept failed job, retried by hand while the stage is deferred, completed as deferred: the cancel keeps it', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, new Error('down'), notSent('no_worker_available'));
    const job = await addProducerJob(h.engine.queue, image, {
      attempts: 1,
      removeOnComplete: false,
      removeOnFail: false,
    });
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'failed for good');
    expect((await h.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    await (await h.engine.queue.getJob(job.id!))!.retry('failed');
    await waitFor(() => done.length === 1, 'the retried job completed');
    expect(done[0]!.result).toMatchObject({ deferred: true });
    const res = await h.engine.cancelActiveDispatch(image);
    // the deferral's wake-up job is removed; the completed job stays
    expect(res).toMatchObject({ hadDeferral: true, removedJobs: 1 });
    expect(await h.engine.queue.getJobState(job.id!)).toBe('completed');
  });

  it('a failed job whose state the cancel cannot read: it stays failed, removedJobs 0', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    await failingJob(h, [new Error('down')], 1, 'failed for good');
    const job = await failedJob(h);
    jest.spyOn(h.engine.queue, 'getJobState').mockRejectedValue(new Error('connection lost'));
    const res = await h.engine.cancelActiveDispatch(image);
    jest.restoreAllMocks();
    expect(res).toMatchObject({ hadDeferral: false, removedJobs: 0 });
    expect(await h.engine.queue.getJobState(job.id!)).toBe('failed');
  });
});

describe('C9: a cancel counts only the jobs it removed', () => {
  it('the job running the stage is locked by its worker: it stays, removedJobs 0', async () => {
    const run = blocking(SENT);
    const h = harness({ executor: run.fn });
    const { jobId } = await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await run.started;
    const res = await h.engine.cancelActiveDispatch(image);
    expect(res).toMatchObject({ inFlight: true, removedJobs: 0 });
    run.release();
    await waitFor(() => done.length === 1, 'the running job completed');
    expect(done[0]!.id).toBe(jobId);
  });
});
