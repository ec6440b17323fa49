import type { Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { sleep, watch } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * a fix: a success released after BullMQ handed the job on marks
 * the job superseded (`sds`, src/lua/scripts.ts BATCH `handedOn`) when BullMQ's lock of the job
 * is no longer the attempt's token, the job's `timestamp` is the attempt's and it has no
 * `finishedOn`. A success of a job with no licence is released LAZILY (`releaseLater`: with the
 * next batch, or after 100 ms), that is after BullMQ completed the job. If in between the job,
 * kept once completed (a job added by hand keeps it), is retried by hand (`job.retry('completed',
 * { resetAttemptsMade: true })`, BullMQ's way to start a job afresh), BullMQ's retry deleted
 * `finishedOn` and the job is waiting or running again under a new lock: `handedOn` takes the
 * operator's retry for a redelivery and marks it superseded. The retried job's begin tells a
 * retry by hand by `sdf` (the `atm` the engine saw when it marked the job finished) differing
 * from `atm`; with `resetAttemptsMade` both read 0, so the job is taken as not retried, and the
 * `sds` mark makes it end as `superseded`: the operator's retry sends nothing (lost), and
 * completes as if it had.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

/**
 * A job added by hand (kept once completed) that an operator retries from the Worker's
 * `completed` listener, at once (its lazy release still queued), with `retry`'s options:
 * the retried job must dispatch again.
 */
async function retriedAtOnce(opts?: { resetAttemptsMade: boolean }) {
  const h = harness();
  h.executor.fallback = SENT;
  const own = await h.engine.queue.add('image', data); // by hand: kept once completed
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

(onCluster ? describe.skip : describe)('C14: a completed job retried by hand at once', () => {
  it('a job retried by hand (resetAttemptsMade) while its lazy release is queued is not marked handed on: the retry dispatches', () =>
    retriedAtOnce({ resetAttemptsMade: true }));

  it('a plain retry by hand (atm counted) while the lazy release is queued dispatches again (sdf differs from atm)', () =>
    retriedAtOnce());

  it('the same retry once the lazy release went out dispatches again (the mark comes from the queued release)', async () => {
    const h = harness();
    h.executor.fallback = SENT;
    const own = await h.engine.queue.add('image', data);
    const worker = h.engine.createWorker();
    const { done } = watch(worker);
    await waitFor(() => done.length >= 1, 'completed', 8000);
    await sleep(300); // the lazy release (100 ms) went out while the job was finished
    const job = (await h.engine.queue.getJob(own.id!))!;
    await job.retry('completed', { resetAttemptsMade: true });
    await waitFor(() => done.length >= 2, 'the retried job completed', 8000);
    expect({ second: done[1]!.result.dispatched, executorCalls: h.executor.calls.length }).toEqual({
      second: true,
      executorCalls: 2,
    });
  });
});
