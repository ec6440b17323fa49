import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { harness, notSent, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { fetchBy } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * FAIL (src/lua/scripts.ts) records BullMQ's stalled count `sdt` when the processor
 * marks a job failed for good; only the engine's Worker 'failed' listener (createWorker /
 * attachWorker) drops it once BullMQ failed the job. On a user's own Worker not attached with
 * `engine.attachWorker` (README presents the attach as being about jobs "BullMQ fails by
 * itself") `sdt` stays for good. A wake-up whose first run is its last (here an unrecoverable
 * error; also a wake-up carrying a chain whose budget is spent) is marked `sdf` 0. Bull Board's
 * Retry with resetAttemptsMade deletes `atm` (0 == sdf: the atm rule cannot see the retry); the
 * retried run's worker freezes before its begin and the stalled check hands it on (`stc` 1 >
 * `sdt` 0): begin takes it for a crash redelivery, skips the `?` record, and a wake-up that is
 * neither retried nor the licence holder is `stale` (`{3}`). The operator's retry completes as
 * `stale_wake_up` and the stage is never sent (README: a retry by hand, "with or without
 * resetAttemptsMade", dispatches the stage with a fresh chain).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C16: a retry by hand on a user's Worker not attached", () => {
  it('a wake-up failed for good on a Worker not attached, retried by hand with resetAttemptsMade, sends the stage also when its run stalls before its begin (was stale_wake_up, never sent)', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'), new UnrecoverableError('rejected'), SENT);
    const own = (stalledInterval: number) => {
      const w = new Worker(h.queueName, (job: Job, token?: string) => h.engine.processor(job, token), {
        connection: client({ maxRetriesPerRequest: null }),
        prefix: h.prefix,
        stalledInterval,
      });
      w.on('error', () => undefined);
      return w;
    };
    const failed: string[] = [];
    const first = own(300);
    first.on('failed', (job) => void (job?.finishedOn && failed.push(job.id!)));
    await h.engine.enqueue(image, {});
    await waitFor(() => h.engine.isStageDeferred(image), 'deferred', 10_000);
    await h.engine.clearDeferrals(image.scope);
    await waitFor(() => failed.length === 1, 'the wake-up failed for good', 10_000);
    await first.close();
    const wakeUpId = failed[0]!;

    await (await h.engine.queue.getJob(wakeUpId))!.retry('failed', { resetAttemptsMade: true });
    // a worker fetches the retried wake-up and freezes before its begin: its lock lapses
    const frozen = await fetchBy(h, 'frozen-worker', 200);
    expect(frozen.id).toBe(wakeUpId);

    const second = own(300);
    const completedAs: string[] = [];
    second.on(
      'completed',
      (job, r) => void (job.id === wakeUpId && completedAs.push((r as { reason: string }).reason)),
    );
    try {
      await waitFor(() => completedAs.length > 0, 'the retried wake-up completed', 15_000);
      expect({ completedAs, calls: h.executor.callsFor(image) }).toEqual({ completedAs: [null], calls: 3 });
    } finally {
      await second.close();
    }
  }, 30_000);
});
