import { Worker, type Job } from 'bullmq';
import { harness } from '../../helpers/engine';
import { redisOptions } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';
import { addProducerJob } from '../../helpers/producer-job';
import type { StageRef } from '../../../src';

const a: StageRef = { scope: ['trim', 'own-worker'], stage: 'a' };

/**
 * C27: "failed jobs removed leave no record behind". A Worker of the user's own that runs the
 * engine's processor (`getNextJob` + `engine.processor`, no engine listener on it) fails a job
 * whose `removeOnFail: true` makes BullMQ remove it: nothing of its stage is left.
 */
describe("C27: a job removed as it fails, by the user's own Worker running engine.processor", () => {
  it('C27: leaves nothing of its stage behind', async () => {
    const h = harness({ retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(a, new Error('downstream 503'));
    const x = await addProducerJob(h.engine.queue, a, { attempts: 1, removeOnFail: true });
    const own = new Worker(h.queueName, undefined, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      autorun: false,
    });
    try {
      const job = (await own.getNextJob('tok-x')) as Job;
      const error = (await h.engine.processor(job, 'tok-x').catch((e: unknown) => e)) as Error;
      expect(error.message).toBe('downstream 503');
      await job.moveToFailed(error, 'tok-x');
      expect(await h.engine.queue.getJob(x.id!)).toBeUndefined();
      expect(await keptFor(h, a)).toEqual([]);
    } finally {
      await own.close();
    }
  });
});
