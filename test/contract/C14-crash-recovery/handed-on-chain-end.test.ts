import { UnrecoverableError } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { onCluster, waitFor } from '../../helpers/redis';
import { fetchBy, latch, sleep, stallFailingWorker, watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * A worker frozen past BullMQ's lock of its job, its dispatch still in flight, resumes and sends
 * the stage after BullMQ's stalled check took the job from it (batch.lua's release, `handedOn`).
 * The first test: the stage holds a failed-job record of an earlier job, so the send's release is a
 * chain's end (mode '1', not a bare success's): the redelivered job is still marked superseded,
 * and the stage is sent once (design.md, "The lock"). The second: BullMQ failed the job itself
 * (maxStalledCount 0) before the send's release: the send marks it superseded all the same, so a
 * retry of it by hand sends nothing (C6, C16); the third, the same with the engine's own Worker,
 * whose failed-job record of the job is written before the send.
 */
const image: StageRef = { scope: ['book-41', 'ch-1', 'sc-3'], stage: 'image' };

/** Enqueues the stage, fetches its job by hand (BullMQ's lock 300 ms, never renewed) and starts its attempt, held until `resume`. */
async function frozenAttempt(h: ReturnType<typeof harness>) {
  const started = latch();
  const resume = latch();
  h.executor.script(image, async () => {
    started.open();
    await resume.opened;
    return SENT;
  });
  expect((await h.engine.enqueue(image, {})).added).toBe(true);
  const job = await fetchBy(h, 'frozen-token', 300);
  const late = h.engine.processor(job, 'frozen-token');
  await started.opened;
  const jobKey = `${h.prefix}:${h.queueName}:${job.id}`;
  await waitFor(async () => (await h.redis.exists(`${jobKey}:lock`)) === 0, "BullMQ's lock of the job lapsed");
  return { job, late, resume: () => resume.open() };
}

/**
 * A frozen attempt whose job a stalled check of `failing`'s Worker fails, then sends; the
 * operator then retries the failed job (Bull Board's Retry): it completes superseded, and the
 * stage was sent once.
 */
async function retriedAfterStalledFailure(
  h: ReturnType<typeof harness>,
  failing: () => Pick<ReturnType<typeof watch>, 'done' | 'failed'> & { close: () => Promise<void> },
) {
  const frozen = await frozenAttempt(h);
  const { done, failed, close } = failing();
  try {
    await waitFor(() => failed.length === 1, 'BullMQ failed the stalled job', 10_000);
    frozen.resume();
    expect(await frozen.late).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(image)).toBe(1);
    await (await h.engine.queue.getJob(frozen.job.id!))!.retry('failed');
    await waitFor(() => done.length === 1, 'the retried job ran', 10_000);
    expect({ id: done[0]!.id, reason: done[0]!.result.reason, calls: h.executor.callsFor(image) }).toEqual({
      id: frozen.job.id,
      reason: 'superseded',
      calls: 1,
    });
  } finally {
    frozen.resume();
    await close();
  }
}

(onCluster ? describe.skip : describe)('C14: a frozen attempt that sends after BullMQ took its job', () => {
  it('C14: beside a failed-job record of the stage (the send ends a chain), the job BullMQ handed on completes superseded; the stage is sent once', async () => {
    const h = harness({ lockMs: 5000, inFlightRetryMs: 100, retry: { attempts: 1 } });
    const other = harness({ lockMs: 5000, inFlightRetryMs: 100 }, h);
    // an earlier job of the stage fails for good: the stage keeps its record
    h.executor.script(image, new UnrecoverableError('refused for good'));
    const first = h.engine.createWorker({ stalledInterval: 200 });
    const firstRun = watch(first);
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    await waitFor(() => firstRun.failed.length === 1, 'the first job failed for good');
    await first.close();
    const frozen = await frozenAttempt(h);
    try {
      // a worker's stalled check hands the job on; its redelivery waits (dispatch_in_flight)
      const worker = other.engine.createWorker({ stalledInterval: 200, maxStalledCount: 1 });
      const { done, failed } = watch(worker);
      await waitFor(
        async () => Number(await h.redis.hget(`${h.prefix}:${h.queueName}:${frozen.job.id}`, 'stc')) > 0,
        'the job handed on',
        10_000,
      );
      frozen.resume();
      expect(await frozen.late).toMatchObject({ dispatched: true });
      await waitFor(() => done.length + failed.length >= 1, 'the handed-on job settled', 10_000);
      await sleep(200);
      expect({
        sentByFrozen: h.executor.callsFor(image),
        sentByRedelivery: other.executor.callsFor(image),
        outcome: done.map((d) => [d.id, d.result.reason]),
        failed: failed.length,
      }).toEqual({
        sentByFrozen: 2,
        sentByRedelivery: 0,
        outcome: [[frozen.job.id, 'superseded']],
        failed: 0,
      });
    } finally {
      frozen.resume();
    }
  }, 30_000);

  it('C14: a job BullMQ failed as stalled before its frozen attempt sent is superseded by that send: a retry of it by hand sends nothing', async () => {
    const h = harness({ lockMs: 5000, inFlightRetryMs: 100 });
    // the app's own Worker (not attached): its stalled check fails the job (maxStalledCount 0)
    await retriedAfterStalledFailure(h, () => {
      const { worker, done, failed } = stallFailingWorker(h);
      return { done, failed, close: () => worker.close() };
    });
  }, 30_000);

  it("C14: the same with the engine's own Worker failing the stalled job (its failed-job record written before the send): a retry by hand sends nothing", async () => {
    const h = harness({ lockMs: 5000, inFlightRetryMs: 100 });
    await retriedAfterStalledFailure(h, () => {
      const worker = h.engine.createWorker({ stalledInterval: 200, maxStalledCount: 0 });
      return { ...watch(worker), close: async () => undefined };
    });
  }, 30_000);
});
