import { DelayedError, Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { handedOn } from '../../helpers/jobs';
import type { StageRef } from '../../../src';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A job fails for good (BullMQ failed it: its record stays); a host then sends the stage (the
 * chain ends). An operator's retry of the failed job (resetAttemptsMade) on a Worker of one's own
 * not attached (`attachWorker`) runs and sends its stage, also when the retried run stalls
 * before its begin: a job failed for good that runs again starts a fresh chain.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C16: a retry by hand on a Worker not attached, after a chain ended elsewhere', () => {
  it('a failed job retried by hand (resetAttemptsMade) on a Worker not attached sends its stage when its run stalls before its begin after a host dispatched the stage', async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 500'), SENT, SENT);
    const redis = client();
    const job = await addProducerJob(h.engine.queue, image, { attempts: 1, removeOnFail: false });
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
