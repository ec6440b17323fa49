import { DelayedError, Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { handedOn } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Commit 20efc5d (BATCH's release, src/lua/scripts.ts ~l.444-453): a chain's end
 * (release mode '1') now marks superseded (`sds`) the job of every failed-job record (`?`) left.
 * begin answers `{6}` superseded for an `sds` job unless it takes the run for a retry by hand
 * (~l.297-305: `retried = (sdf ~= atm) or ((sdf or failedMe) and not redelivered)`). On a Worker
 * of your own not attached (`attachWorker`), nothing drops `sdt` once BullMQ failed the job;
 * docs/design.md (the job hash fields row) says what that costs: "a retry by hand with
 * resetAttemptsMade whose run stalls before its begin is then taken for a redelivery (no fresh
 * budget)". Since 20efc5d it costs more: when the stage went out meanwhile (a host's tick), the
 * retry by hand of a job that failed for good on its only attempt (`sdf` 0 == `atm` 0 after the
 * reset) whose run stalls before its begin completes `superseded`: the stage is never sent,
 * though the README says an operator's retry of a failed job dispatches it. The doc statement is
 * wrong (and the stage the operator asked for is lost). Control (checked by hand): the same test
 * with `h.engine.attachWorker(worker)` passes (its 'failed' listener drops `sdt`).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C16: a retry by hand on a Worker not attached, after a chain ended elsewhere', () => {
  it('a failed job retried by hand (resetAttemptsMade) on a Worker not attached sends its stage when its run stalls before its begin after a host dispatched the stage (was superseded by the chain end, never sent)', async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 500'), SENT, SENT);
    const redis = client();
    const job = await h.engine.queue.add('image', data, { jobId: 'own-1', attempts: 1, removeOnFail: false });
    let runs = 0;
    const completions: unknown[] = [];
    // the user's own Worker running engine.processor, not attached
    const worker = new Worker(
      h.queueName,
      async (j: Job, token?: string) => {
        if (j.id !== job.id) return h.engine.processor(j, token);
        runs += 1;
        if (runs === 2) {
          // the retried run's worker freezes before its begin: the stalled check hands it on
          await handedOn(redis, `${h.prefix}:${h.queueName}:${j.id}`);
          throw new DelayedError();
        }
        return h.engine.processor(j, token);
      },
      { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix, stalledInterval: 300 },
    );
    worker.on('error', () => undefined);
    worker.on('completed', (j: Job, result: unknown) => {
      if (j.id === job.id) completions.push(result);
    });
    try {
      await waitFor(
        async () => (await h.engine.queue.getJobState(job.id!)) === 'failed',
        'the job failed for good',
        10_000,
      );
      // a host's tick sends the stage: the chain ends
      const direct = await h.engine.dispatchStage(image, {});
      expect(direct.dispatched).toBe(true);
      // the operator retries the failed job (Bull Board's Retry with resetAttemptsMade)
      await (await h.engine.queue.getJob(job.id!))!.retry('failed', { resetAttemptsMade: true });
      await waitFor(() => completions.length >= 1, 'the retried job completed', 15_000);
      const retried = completions[0] as { dispatched?: boolean; reason?: string | null };
      expect({ dispatched: retried.dispatched, reason: retried.reason, calls: h.executor.callsFor(image) }).toEqual({
        dispatched: true,
        reason: null,
        calls: 3, // the failure, the host's dispatch, the retry by hand
      });
    } finally {
      await worker.close();
    }
  }, 30_000);
});
