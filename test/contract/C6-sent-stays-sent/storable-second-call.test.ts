import { harness } from '../../helpers/engine';
import { fast, sleep, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { ExecutorResult, StageRef } from '../../../src';

/**
 * a fix (`storable`, src/bullmq/processor.ts) leaves out of the
 * job's return value an executor answer JSON cannot hold, so that BullMQ's completion does not
 * throw after the stage was sent. It tries `JSON.stringify(result.result)` ONCE; BullMQ 6.7 then
 * stringifies the return value again, twice (Job.moveToCompleted, then the backend's
 * moveToCompleted). An answer whose JSON fails on a later try (a `toJSON` reading a response
 * stream, a lazy field, a getter that fails once its source is closed) passes the engine's check
 * and fails BullMQ's: the completion throws, BullMQ's Worker takes it for the job's failure and
 * fails the job: on its last attempt the job ends FAILED though its stage was sent (and the
 * engine records it as a failed job, which a retry by hand runs again); with attempts left,
 * BullMQ spends one and the retry ends `superseded`, its return value saying nothing was sent.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C6: an answer whose JSON fails only on a later try', () => {
  it('a `toJSON` that works once: the return value keeps the plain data of its one JSON, and the sent job completes once', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    let calls = 0;
    const detail = {
      toJSON() {
        if (calls++ > 0) throw new Error('response stream already read');
        return { id: 'render-42' };
      },
    };
    h.executor.script(
      image,
      async () => ({ dispatched: true, jobs: 1, reason: null, detail }) as ExecutorResult<string>,
    );
    h.executor.fallback = { dispatched: true, jobs: 1, reason: null };
    const worker = h.engine.createWorker();
    worker.on('error', () => undefined); // BullMQ reports its failed completion here
    const { done, failed } = watch(worker);
    const { jobId } = await h.engine.enqueue(image, {});
    await waitFor(() => done.length + failed.length >= 1, 'the job settled', 8000);
    await sleep(300);
    // completed once (and removed, the engine's jobs are: 'unknown'), the answer kept as plain data
    expect({
      executorCalls: h.executor.calls.length,
      state: await h.engine.queue.getJobState(jobId!),
      bullFailed: failed.map((f) => f.error.message),
      completed: done.map((d) => d.result.result),
    }).toEqual({
      executorCalls: 1,
      state: 'unknown',
      bullFailed: [],
      completed: [{ dispatched: true, jobs: 1, reason: null, detail: { id: 'render-42' } }],
    });
  });
});
