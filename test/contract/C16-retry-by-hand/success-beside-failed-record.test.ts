import { Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import type { StageRef } from '../../../src';

/**
 * A job's last failure is recorded (`?`) and its worker dies before BullMQ fails it; a host sends
 * the stage meanwhile (the chain ends with the job still active), then BullMQ redelivers the
 * job. The chain end superseded it: the stage is sent once. The dying worker is BullMQ's manual
 * processing (`getNextJob` + `engine.processor`), which then never moves the job, as a killed
 * process would not.
 */
const image: StageRef = { scope: ['book-28', 'ch-1', 'sc-1'], stage: 'image' };

describe('C16: a success and a failed-job record whose job was never failed by BullMQ', () => {
  it('a stage is sent once when a job fails for good, its worker dies before BullMQ fails it, and a host sends the stage before its redelivery', async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 503'), SENT, SENT);
    const x = await addProducerJob(h.engine.queue, image, { attempts: 1 });
    const dying = new Worker(h.queueName, undefined, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      autorun: false,
      lockDuration: 1000,
    });
    try {
      const run = (await dying.getNextJob('tok-x')) as Job;
      await expect(h.engine.processor(run, 'tok-x')).rejects.toThrow('downstream 503');
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
      // the worker died before BullMQ failed x (x stays active)
      expect(await h.engine.queue.getJobState(x.id!)).toBe('active');
      // another worker's stalled check redelivers x
      const { done } = watch(h.engine.createWorker({ stalledInterval: 300 }));
      await waitFor(() => done.length === 1, 'the redelivered job ran', 15_000);
      const sends = h.executor.callsOf(image).filter((c) => c.result?.dispatched).length;
      expect({ sends, redelivery: done[0]!.result }).toMatchObject({
        sends: 1,
        redelivery: { dispatched: false, reason: 'superseded' },
      });
    } finally {
      await dying.close(true);
    }
  }, 30_000);
});
