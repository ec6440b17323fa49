import { Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { handedOn } from '../../helpers/jobs';
import type { StageRef } from '../../../src';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A kept job (removeOnComplete: false) runs on a worker that freezes (a GC pause) while its
 * executor runs, past BullMQ's job lock but not past the engine's `lockMs`. BullMQ's stalled
 * check hands the job on. The frozen worker wakes, its executor answers `dispatched`: the
 * redelivery, which waited while the stalled attempt's lock lived, must send nothing.
 */
const image: StageRef = { scope: ['book-26', 'ch-1', 'sc-1'], stage: 'image' };

describe('C12: a kept job whose worker froze past its job lock', () => {
  it('a stage is sent once when a worker running a kept (removeOnComplete: false) job freezes past its BullMQ job lock and wakes to finish', async () => {
    const h = harness();
    const redis = client();
    let jobKey = '';
    // run 1: the worker freezes inside the executor until BullMQ handed the job on, then sends
    h.executor.script(image, async () => {
      await handedOn(redis, jobKey);
      return SENT;
    });
    const job = await addProducerJob(h.engine.queue, image, { removeOnComplete: false, removeOnFail: false });
    jobKey = `${h.prefix}:${h.queueName}:${job.id}`;
    const results: { dispatched?: boolean; reason?: string | null }[] = [];
    const worker = new Worker(
      h.queueName,
      async (j: Job, token?: string) => {
        const out = await h.engine.processor(j, token);
        results.push(out as never);
        return out;
      },
      { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix, stalledInterval: 300 },
    );
    worker.on('error', () => undefined);
    h.engine.attachWorker(worker);
    try {
      await waitFor(() => results.length >= 2, 'the redelivery ran', 20_000);
      expect(results[0]!.dispatched).toBe(true);
      // the frozen run sent the stage; its redelivery must not send it again
      expect(results[1]!.dispatched).toBe(false);
      expect(h.executor.callsFor(image)).toBe(1);
    } finally {
      await worker.close();
    }
  }, 40_000);
});
