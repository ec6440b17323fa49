import { UnrecoverableError } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C11: processor: an error that ends the job for good', () => {
  it("an UnrecoverableError from the executor fails the job as it is: the job's stack trace is the executor's", async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    function thrownByTheExecutor(): Error {
      return new UnrecoverableError('the model refuses this payload');
    }
    h.executor.script(image, thrownByTheExecutor());
    const { jobId } = await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the job failed');
    await waitFor(async () => (await h.engine.queue.getJobState(jobId!)) === 'failed', 'failed for good');
    const job = (await h.engine.queue.getJob(jobId!))!;
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toBe('the model refuses this payload');
    expect(job.stacktrace?.[0]).toContain('thrownByTheExecutor');
  });
});

describe('C11: which budget ends a real failure', () => {
  it("a real failure at the Worker's last allowed start fails the job then, with the executor's error (not BullMQ's 'started more than allowable limit' at the next fetch)", async () => {
    const h = harness({ retry: { attempts: 5, backoff: fast } });
    h.executor.script(image, new Error('down #1'), new Error('down #2'), SENT);
    await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker({ maxStartedAttempts: 2 }));
    await waitFor(() => failed.length === 2, 'two failures');
    const [job] = await h.engine.queue.getJobs(['failed']);
    expect(job).toBeDefined();
    expect({ reason: job!.failedReason, calls: h.executor.callsFor(image) }).toEqual({ reason: 'down #2', calls: 2 });
    // the engine ends it itself, as its last failure: unrecoverable, the executor's error its cause
    // (BullMQ 6 would also stop retrying there, but with the plain error)
    expect(failed.map((f) => f.error.name)).toEqual(['Error', 'UnrecoverableError']);
    expect((failed[1]!.error as Error & { cause?: Error }).cause?.message).toBe('down #2');
  });
});
