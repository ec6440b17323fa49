import { Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import type { StageRef } from '../../../src';

/**
 * A job's last failure is recorded (`?`) and its live worker is a moment away from failing it in
 * BullMQ; meanwhile a host sends the stage (the chain ends with the job still active): the chain
 * end supersedes it. Once BullMQ failed it, an operator's retry of it completes as `superseded`
 * (the mark wins): the stage went out, and is not sent twice ("Retry all" on a stage's failed
 * jobs sends it once). Manual processing stands for the live worker.
 */
const image: StageRef = { scope: ['book-30', 'ch-9', 'sc-1'], stage: 'image' };

describe('C16: a retry by hand of a job whose failure the chain end superseded', () => {
  it('a job failing for good while a host sends the stage, retried by hand once BullMQ failed it, completes as superseded', async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 503'), SENT, SENT);
    const added = await addProducerJob(h.engine.queue, image, { attempts: 1 });
    const manual = new Worker(h.queueName, undefined, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      autorun: false,
      lockDuration: 10_000,
    });
    try {
      const x = (await manual.getNextJob('tok-x')) as Job;
      // x's last failure: recorded (`?`), BullMQ not told yet (its worker is alive, a moment away)
      const xError = (await h.engine.processor(x, 'tok-x').then(
        () => undefined,
        (e: Error) => e,
      )) as Error;
      expect(xError).toBeInstanceOf(Error);
      // a host sends the stage: the chain ends with x still active
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      // x's worker fails it now; the operator retries it (Bull Board's Retry)
      await x.moveToFailed(xError, 'tok-x', false);
      await (await h.engine.queue.getJob(added.id!))!.retry('failed', { resetAttemptsMade: true });
      const { done } = watch(h.engine.createWorker());
      await waitFor(() => done.length === 1, 'the retried job ran', 15_000);
      expect(done[0]).toMatchObject({ id: added.id, result: { dispatched: false, reason: 'superseded' } });
      expect(h.executor.callsFor(image)).toBe(2);
    } finally {
      await manual.close(true);
    }
  }, 30_000);
});
