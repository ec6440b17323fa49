import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * README, "an operator …": "retries … a kept completed job … the stage is dispatched
 * with a fresh chain and a fresh retry budget". A job added by hand and kept on completion is
 * marked finished by the processor (FINISHED, src/lua/scripts.ts `markFinished`): `sdf` = BullMQ's
 * `atm` BEFORE BullMQ counts the completion (0 for a first run). BATCH's begin takes a run for a
 * retry by hand when `sdf ~= atm`, or when the job has a `<member>?` record (only FAIL writes one).
 * Bull Board's / `job.retry('completed', { resetAttemptsMade: true })` deletes `atm`: the retried
 * run has atm 0 == sdf 0 and no `?` record, so it is not seen as retried. A job that recorded a
 * deferral (`sds`, the common case for a kept job: capacity first, its wake-up sent the stage
 * later) then stops as `superseded` (begin: `if c[2] and not retried then return {6}`): the
 * operator's retry completes without calling the executor; the stage is not sent again.
 * The same retry without resetAttemptsMade sends it (atm 1 ~= sdf 0).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C16: a kept completed job retried by hand with resetAttemptsMade', () => {
  it('a kept completed job that had deferred, retried by hand with resetAttemptsMade, sends its stage with a fresh chain (was superseded, never sent)', async () => {
    const h = harness();
    // the kept job defers (capacity); its wake-up (cleared early) sends the stage; the retry by hand sends it again
    h.executor.script(image, notSent('no_worker_available'), SENT, SENT);
    const job = await h.engine.queue.add('image', data, {
      jobId: 'kept-1',
      attempts: 3,
      removeOnComplete: false,
    });
    h.engine.createWorker({ stalledInterval: 300 });
    await waitFor(
      async () => (await h.engine.queue.getJobState(job.id!)) === 'completed',
      'the kept job completed (deferred)',
      10_000,
    );
    await h.engine.clearDeferrals(image.scope);
    await waitFor(async () => h.executor.callsFor(image) === 2, 'the wake-up sent the stage', 10_000);
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'not deferred', 5_000);

    // the operator retries the kept completed job, resetting its attempts
    await (await h.engine.queue.getJob(job.id!))!.retry('completed', { resetAttemptsMade: true });
    await waitFor(
      async () => (await h.engine.queue.getJobState(job.id!)) === 'completed',
      'the retried job finished',
      10_000,
    );
    const done = await h.engine.queue.getJob(job.id!);
    expect({ calls: h.executor.callsFor(image), reason: done?.returnvalue?.reason }).toEqual({
      calls: 3,
      reason: null,
    });
  }, 30_000);
});
