import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { harness, notSent } from '../helpers/engine';
import { client, waitFor } from '../helpers/redis';
import { handedOn } from '../helpers/jobs';
import type { StageRef } from '../../src';

/**
 * Review 22. Commit b5526de/7fce5db (BATCH's begin, src/lua/scripts.ts ~l.296): a run of a job
 * recorded `<member>?` whose stalled count grew since FAIL's `sdt` is a redelivery, "not a retry
 * by hand". For a WAKE-UP that is a dead end: FAIL (the processor's, before BullMQ fails the job)
 * already turned its licence into the `?` record, so the redelivery is neither retried nor the
 * licence holder, and begin answers `{3}` stale (`wake == 'w' and not retried and lic ~= me`).
 * The redelivered wake-up COMPLETES as `stale_wake_up` (and is removed: removeOnComplete): the
 * stage's failure vanishes from BullMQ's failed list, nothing is left for an operator to retry
 * (README: "a job that fails for good stays as the record a cancel and a retry by hand reach"),
 * and its `?` record names a job that no longer exists. A plain job in the same spot runs once
 * more and fails for good (review 20's test): BullMQ's own behaviour on such a crash.
 * The crash is simulated as in review 20: after the processor threw the final failure, the
 * wrapper drops BullMQ's lock and waits for the stalled check before the error reaches BullMQ.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('review 22: a wake-up whose worker crashes between FAIL and BullMQ failing it', () => {
  it('review 22, fixed: a wake-up redelivered after a crash between its final FAIL and BullMQ failing it runs once more and fails for good (was stale_wake_up: its failure vanished)', async () => {
    const h = harness();
    h.executor.script(
      image,
      notSent('no_worker_available'),
      new UnrecoverableError('downstream rejects the stage'),
      new UnrecoverableError('downstream rejects the stage again'),
    );
    const redis = client();
    let crashed = false;
    let wakeUpId = '';
    const worker = new Worker(
      h.queueName,
      async (job: Job, token?: string) => {
        try {
          return await h.engine.processor(job, token);
        } catch (error) {
          if (!crashed && (error as Error).name === 'UnrecoverableError') {
            crashed = true;
            wakeUpId = job.id!;
            // the process froze (or died) here: its lock lapses and the stalled check hands the job on
            await handedOn(redis, `${h.prefix}:${h.queueName}:${job.id}`);
          }
          throw error;
        }
      },
      { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix, stalledInterval: 300, concurrency: 2 },
    );
    worker.on('error', () => undefined);
    h.engine.attachWorker(worker);
    const completedAs: string[] = [];
    worker.on(
      'completed',
      (job, r) => void (job.id === wakeUpId && completedAs.push((r as { reason: string }).reason)),
    );
    try {
      await h.engine.enqueue(image, {});
      await waitFor(() => h.engine.isStageDeferred(image), 'deferred', 10_000);
      await h.engine.clearDeferrals(image.scope);
      await waitFor(() => crashed, 'the wake-up failed for good, then the crash', 10_000);
      await waitFor(
        async () => ['completed', 'failed', null].includes(await stateOf(h, wakeUpId)),
        'the redelivered wake-up finished',
        15_000,
      );
      expect({ state: await stateOf(h, wakeUpId), calls: h.executor.callsFor(image), completedAs }).toEqual({
        state: 'failed',
        calls: 3,
        completedAs: [],
      });
    } finally {
      await worker.close();
    }
  }, 30_000);
});

async function stateOf(h: ReturnType<typeof harness>, id: string): Promise<string | null> {
  const s = await h.engine.queue.getJobState(id);
  return s === 'unknown' ? null : s;
}
