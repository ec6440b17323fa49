import { FlowProducer, Queue } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { redisOptions, waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * Hostile review: a flow's child is a dispatch job by its producer id, without deduplication
 * (C17). Two flows each with a child for the same stage, both waiting at once: the engine has
 * nothing that meets them (no `de:` key, no licence), so both dispatch the stage, one after the
 * other (the second waits out the first's lock, `dispatch_in_flight`, then runs). For a stage
 * "Retry all on two failed jobs of a stage sends it once" (C16) and "enqueue adds at most one
 * job per stage" (C18) say one pending request sends the stage once.
 */
const image: StageRef = { scope: ['flow-twice', 'ch-1'], stage: 'image' };

describe('C17: two flow children of one stage', () => {
  it('C17: two flow children of one stage waiting together dispatch it once', async () => {
    const h = harness({ inFlightRetryMs: 50 });
    h.executor.fallback = SENT;
    const parentQueue = new Queue(`${h.queueName}-parent`, { connection: redisOptions(), prefix: h.prefix });
    const flows = new FlowProducer({ connection: redisOptions(), prefix: h.prefix });
    try {
      for (const n of [1, 2]) {
        await flows.add({
          name: `render-${n}`,
          queueName: parentQueue.name,
          data: {},
          children: [
            {
              name: 'image',
              queueName: h.queueName,
              data: { v: 1, scope: image.scope, stage: image.stage, payload: { n } },
              opts: { jobId: readyJobId(stageId(image)), attempts: 3 },
            },
          ],
        });
      }
      const { done, failed } = watch(h.engine.createWorker({ concurrency: 2 }));
      await waitFor(() => done.length + failed.length >= 2, 'both children settled', 8000);
      expect({ calls: h.executor.callsFor(image), failed: failed.length }).toEqual({ calls: 1, failed: 0 });
    } finally {
      await flows.close();
      await parentQueue.close();
    }
  });
});
