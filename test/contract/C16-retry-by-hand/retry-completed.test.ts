import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { JobsOptions } from 'bullmq';
import type { StageRef } from '../../../src';
import { fast, watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A kept completed job (removeOnComplete: false, or a count or an age) retried with
 * job.retry('completed') has the budget BullMQ gives it: with `resetAttemptsMade` a fresh one,
 * without it the attempts it has left. It runs with the chain it finds (none: a fresh one); a
 * job that once recorded a deferral completes as `superseded` (its wake-up carried the stage).
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** A job kept after completion that needed one retry to succeed (BullMQ's `atm` 2, attempts 2), and the operator's re-run of it in Bull Board. */
async function completedAfterOneFailure(opts: JobsOptions = { removeOnComplete: false }) {
  const h = harness({ retry: { attempts: 2, backoff: fast } });
  h.executor.script(image, new Error('down'), SENT);
  const job = await addProducerJob(h.engine.queue, image, { attempts: 2, backoff: fast, ...opts });
  const { done, failed } = watch(h.engine.createWorker());
  await waitFor(() => done.length === 1, 'completed after one failure');
  expect(done[0]!.result).toMatchObject({ dispatched: true });
  const retry = async (resetAttemptsMade = true) =>
    (await h.engine.queue.getJob(job.id!))!.retry('completed', { resetAttemptsMade });
  return { h, id: job.id!, done, failed, retry };
}

describe("C16: job.retry('completed') of a kept job", () => {
  it('without resetAttemptsMade has the attempts BullMQ left it: none, so its first real failure after the retry is final', async () => {
    const { h, id, failed, retry } = await completedAfterOneFailure();
    h.executor.script(image, new Error('down again'), SENT);
    await retry(false);
    await waitFor(async () => (await h.engine.queue.getJobState(id)) === 'failed', 'failed for good');
    await waitFor(() => failed.length === 2, 'the failed event');
    expect(failed.map((f) => f.error.name)).toEqual(['Error', 'UnrecoverableError']);
    expect(h.executor.calls).toHaveLength(3);
  });

  it.each([
    ['removeOnComplete: false', { removeOnComplete: false }],
    ['removeOnComplete: { count: 10 }', { removeOnComplete: { count: 10 } }],
    ['removeOnComplete: { age: 3600 }', { removeOnComplete: { age: 3600 } }],
  ])(
    'with resetAttemptsMade, kept with %s, gets a fresh budget: its first real failure after the retry is not final',
    async (_n, keep) => {
      const { h, done, failed, retry } = await completedAfterOneFailure(keep);
      h.executor.script(image, new Error('down again'), SENT);
      await retry();
      await waitFor(() => done.length === 2 || failed.length === 3, 'the retried job settled');
      expect(failed.map((f) => f.error.name)).toEqual(['Error', 'Error']);
      expect(done[1]?.result).toMatchObject({ dispatched: true });
      expect(h.executor.calls).toHaveLength(4);
    },
  );

  it('with resetAttemptsMade gets one fresh budget, not one per attempt: it fails for good after its attempts (2 more executor calls)', async () => {
    const { h, id, failed, retry } = await completedAfterOneFailure();
    const down = new Error('down for good');
    h.executor.script(image, down, down, down, down, SENT);
    await retry();
    await waitFor(
      // (BullMQ's failed event reaches the worker after the state: wait for both)
      async () =>
        failed.at(-1)?.error.message === 'down for good' && (await h.engine.queue.getJobState(id)) === 'failed',
      'failed for good after its fresh budget',
    );
    expect(h.executor.calls).toHaveLength(4);
    expect(failed.at(-1)!.error.message).toBe('down for good');
  });
});

describe("C16: job.retry('completed') of a kept job that once deferred", () => {
  it.each([false, true])(
    'completes as superseded: its wake-up carried the stage (resetAttemptsMade: %s)',
    async (reset) => {
      const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 } });
      h.executor.script(image, notSent('no_worker_available'), SENT);
      const job = await addProducerJob(h.engine.queue, image, { backoff: fast, removeOnComplete: false });
      const { done } = watch(h.engine.createWorker());
      await waitFor(() => done.length === 2, 'the job deferred, its wake-up dispatched');
      expect(await h.engine.isStageDeferred(image)).toBe(false);
      // later the operator re-runs the kept job in Bull Board
      await (await h.engine.queue.getJob(job.id!))!.retry('completed', { resetAttemptsMade: reset });
      await waitFor(() => done.length === 3, 'the retried job completed');
      expect(done[2]).toMatchObject({ id: job.id, result: { dispatched: false, reason: 'superseded' } });
      expect(h.executor.calls).toHaveLength(2);
    },
  );
});
