import { harness, SENT } from '../../helpers/engine';
import { held } from '../../helpers/held';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A stage with a job failed for good (its record kept) is enqueued again and
 * the new job sends it. An operator retries the failed job while that success
 * runs: the retry came before the chain's end, the stage went out, so the
 * retried job must not send it a second time. The success's release must
 * therefore look at the stage's failed-job records when the attempt ends
 * (it is awaited, not left to ride in a later batch): a release that lands
 * only after BullMQ completed the job takes the retry for one made after the
 * chain's end, and the retried job sends the stage again.
 */
const image: StageRef = { scope: ['book-31', 'ch-1', 'sc-1'], stage: 'image' };

describe('C16: a retry by hand made while another job of the stage sends it', () => {
  it('a failed job retried by hand while a new job of the stage runs completes as superseded once that job sent the stage: the stage is sent once', async () => {
    const h = harness({ retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } } });
    const success = held(SENT);
    h.executor.script(image, new Error('downstream 503'), success.answer);
    // one job at a time: the retried job waits while the new one runs
    const worker = h.engine.createWorker({ autorun: false, concurrency: 1 });
    const { done, failed } = watch(worker);
    void worker.run();

    const x = await h.engine.enqueue(image, null);
    await waitFor(() => failed.length === 1, 'the first job to fail for good');
    expect(failed[0]).toMatchObject({ id: x.jobId, error: { message: 'downstream 503' } });
    // nothing pending: a new job is added, and runs
    const y = await h.engine.enqueue(image, null);
    expect(y).toMatchObject({ added: true });
    await success.running;

    // the operator retries the failed job (Bull Board's Retry) while y's executor runs
    await (await h.engine.queue.getJob(x.jobId!))!.retry('failed');
    expect(await h.engine.queue.getJobState(x.jobId!)).toBe('waiting');

    // y sends the stage; the worker takes no further job until resumed
    const paused = worker.pause();
    success.release();
    await paused;
    expect(done).toEqual([{ id: y.jobId, result: expect.objectContaining({ dispatched: true }) }]);
    // (whatever y's release still had to do has landed: the stage's lock is gone)
    const lock = `${h.prefix}:${h.queueName}:sd:inflight:*`;
    await waitFor(async () => (await h.redis.keys(lock)).length === 0, "y's release to land", 5000);

    worker.resume();
    await waitFor(() => done.length === 2, 'the retried job to run', 15_000);
    const sends = h.executor.callsOf(image).filter((c) => c.result?.dispatched).length;
    expect({ sends, retried: done[1] }).toEqual({
      sends: 1,
      retried: { id: x.jobId, result: expect.objectContaining({ dispatched: false, reason: 'superseded' }) },
    });
  }, 30_000);
});
