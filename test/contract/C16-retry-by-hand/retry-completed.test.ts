import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { JobsOptions } from 'bullmq';
import { stageId, type StageRef } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { readyJobId } from '../../../src/job-data';
import { fast, watch } from '../../helpers/jobs';

/**
 * Contract: a retry by hand dispatches the stage with a fresh budget. A job
 * kept after completion (removeOnComplete: false, added by the host's own
 * producer) that needed a retry to succeed keeps BullMQ's `atm`; retried with
 * job.retry('completed') it is not marked `sdf`, so begin counts its old
 * failures (atm - sdb + sdx) and its first new failure is final.
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
  const job = await h.engine.queue.add(
    'image',
    { v: 1, scope: image.scope, stage: image.stage, payload: {} },
    { attempts: 2, backoff: fast, ...opts },
  );
  const { done, failed } = watch(h.engine.createWorker());
  await waitFor(() => done.length === 1, 'completed after one failure');
  expect(done[0]!.result).toMatchObject({ dispatched: true });
  const retry = async () => (await h.engine.queue.getJob(job.id!))!.retry('completed');
  return { h, id: job.id!, done, failed, retry };
}

describe("C16: job.retry('completed') of a kept job", () => {
  it('gets a fresh budget: its first real failure after the retry is not final', async () => {
    const { h, done, failed, retry } = await completedAfterOneFailure();
    h.executor.script(image, new Error('down again'), SENT);
    await retry();
    await waitFor(() => done.length === 2 || failed.length === 2, 'the retried job settled');
    expect(failed.map((f) => f.error.name)).not.toContain('UnrecoverableError');
    expect(done[1]?.result).toMatchObject({ dispatched: true });
  });

  it.each([
    ['removeOnComplete: false', { removeOnComplete: false }],
    ['removeOnComplete: { count: 10 }', { removeOnComplete: { count: 10 } }],
    ['removeOnComplete: { age: 3600 }', { removeOnComplete: { age: 3600 } }],
  ])('a producer’s job (`<stage id>@r.…`, deduplicated) kept with %s gets a fresh budget too', async (_n, keep) => {
    const sid = stageId(image);
    const { h, done, failed, retry } = await completedAfterOneFailure({
      jobId: readyJobId(sid),
      deduplication: { id: sid },
      ...keep,
    });
    h.executor.script(image, new Error('down again'), SENT);
    await retry();
    await waitFor(() => done.length === 2 || failed.length === 2, 'the retried job settled');
    // (its second failure is the engine's own quiet retry: BullMQ's attempts are spent)
    expect(failed.map((f) => f.error.name)).toEqual(['Error']);
    expect(done[1]?.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(4);
  });

  it('gets one fresh budget, not one per attempt: it fails for good after its attempts (2 more executor calls)', async () => {
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
  it('dispatches the stage once its deferral is over (it is not deferred, in flight or cancelled)', async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    const job = await h.engine.queue.add(
      'image',
      { v: 1, scope: image.scope, stage: image.stage, payload: {} },
      { attempts: 3, backoff: fast, removeOnComplete: false },
    );
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 2, 'the job deferred, its wake-up dispatched');
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    // weeks later the operator re-runs the kept job in Bull Board to send the stage again
    await (await h.engine.queue.getJob(job.id!))!.retry('completed');
    await waitFor(() => done.length === 3, 'the retried job completed');
    expect(done[2]!.result).toMatchObject({ dispatched: true });
  });
});

