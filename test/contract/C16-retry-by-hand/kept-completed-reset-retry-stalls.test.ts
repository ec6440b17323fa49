import { harness, notSent, SENT } from '../../helpers/engine';
import { fetchBy } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * Commit 195572b (BATCH's begin, src/lua/scripts.ts ~l.297):
 * `retried = (sdf ~= atm) or ((sdf or failedMe) and not redelivered)`, with
 * `redelivered = stc > sdt`. FINISHED (`markFinished`) records `sdt` when the processor marks a
 * kept job completed, but nothing ever drops it once BullMQ completed the job: only the Worker
 * 'failed' listener's FAIL drops `sdt`, for failures. A kept completed job that deferred (`sds`)
 * and is retried by hand with resetAttemptsMade (`atm` 0 == `sdf` 0: the atm rule cannot see
 * the retry) is told from a crash redelivery only by its stalled count. When the retried run's
 * worker freezes before its begin (GC pause, a worker killed right after fetching it) and the
 * stalled check hands it on, `stc` 1 > `sdt` 0: begin takes the operator's retry for a
 * redelivery of the old run and, the job being `sds`, answers `{6}` superseded. The retry
 * completes without calling the executor: the stage is not sent (README: an operator retrying
 * a kept completed job gets the stage dispatched with a fresh chain). Same a test
 * (kept-completed-reset-retry), plus one frozen fetch; a review fixed this order for a failed
 * job, not for a completed one.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C16: a kept completed job retried by hand whose retried run stalls before its begin', () => {
  it('an operator retry (resetAttemptsMade) of a kept completed job that had deferred sends its stage also when the retried run stalls before its begin (was superseded, never sent)', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'), SENT, SENT);
    const job = await h.engine.queue.add('image', data, { jobId: 'kept-1', attempts: 3, removeOnComplete: false });
    const first = h.engine.createWorker({ stalledInterval: 300 });
    await waitFor(
      async () => (await h.engine.queue.getJobState(job.id!)) === 'completed',
      'the kept job completed (deferred)',
      10_000,
    );
    await h.engine.clearDeferrals(image.scope);
    await waitFor(async () => h.executor.callsFor(image) === 2, 'the wake-up sent the stage', 10_000);
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'not deferred', 5_000);
    await first.close();

    // the operator retries the kept completed job, resetting its attempts (Bull Board)
    await (await h.engine.queue.getJob(job.id!))!.retry('completed', { resetAttemptsMade: true });
    // a worker fetches the retried job and freezes before its begin: its lock lapses
    const frozen = await fetchBy(h, 'frozen-worker', 200);
    expect(frozen.id).toBe(job.id);

    // a healthy worker's stalled check hands it on and runs it
    h.engine.createWorker({ stalledInterval: 300 });
    await waitFor(
      async () =>
        (await h.engine.queue.getJobState(job.id!)) === 'completed' &&
        Number((await h.engine.queue.getJob(job.id!))?.stalledCounter ?? 0) > 0,
      'the retried job finished',
      15_000,
    );
    const done = await h.engine.queue.getJob(job.id!);
    expect({ calls: h.executor.callsFor(image), reason: done?.returnvalue?.reason }).toEqual({
      calls: 3,
      reason: null,
    });
  }, 30_000);
});
