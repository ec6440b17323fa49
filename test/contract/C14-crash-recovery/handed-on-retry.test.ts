import type { Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { sleep, watch } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A success's release is awaited before BullMQ completes the job, so a kept completed job that
 * an operator retries at once (from the Worker's `completed` listener) is not taken for a job
 * BullMQ handed on (marked superseded): the retry dispatches again, with or without
 * `resetAttemptsMade`, at once or later.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * A producer job kept once completed that an operator retries from the Worker's `completed`
 * listener, at once, with `retry`'s options: the retried job must dispatch again.
 */
async function retriedAtOnce(opts?: { resetAttemptsMade: boolean }) {
  const h = harness();
  h.executor.fallback = SENT;
  const own = await addProducerJob(h.engine.queue, image, { removeOnComplete: false });
  const worker = h.engine.createWorker();
  const { done } = watch(worker);
  let retried = false;
  worker.on('completed', (job: Job) => {
    if (retried) return;
    retried = true;
    // the operator (a dashboard's "retry" button, a script) retries the completed job afresh
    void job.retry('completed', opts);
  });
  await waitFor(() => done.length >= 2, 'the retried job completed too', 8000);
  await sleep(100);
  expect(done.map((d) => d.id)).toEqual([own.id, own.id]);
  expect({
    second: { dispatched: done[1]!.result.dispatched, reason: done[1]!.result.reason },
    executorCalls: h.executor.calls.length,
  }).toEqual({ second: { dispatched: true, reason: null }, executorCalls: 2 });
}

(onCluster ? describe.skip : describe)('C14: a kept completed job retried by hand', () => {
  it('retried at once with resetAttemptsMade, it is not taken for a job handed on: the retry dispatches', () =>
    retriedAtOnce({ resetAttemptsMade: true }));

  it('retried at once without resetAttemptsMade, it dispatches again', () => retriedAtOnce());

  it('retried a while after it completed, it dispatches again', async () => {
    const h = harness();
    h.executor.fallback = SENT;
    const own = await addProducerJob(h.engine.queue, image, { removeOnComplete: false });
    const worker = h.engine.createWorker();
    const { done } = watch(worker);
    await waitFor(() => done.length >= 1, 'completed', 8000);
    const job = (await h.engine.queue.getJob(own.id!))!;
    await job.retry('completed', { resetAttemptsMade: true });
    await waitFor(() => done.length >= 2, 'the retried job completed', 8000);
    expect({ second: done[1]!.result.dispatched, executorCalls: h.executor.calls.length }).toEqual({
      second: true,
      executorCalls: 2,
    });
  });
});
