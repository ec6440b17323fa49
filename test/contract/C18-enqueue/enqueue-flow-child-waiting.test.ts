import { FlowProducer, Queue } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { redisOptions, waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * Hostile review: C18 says `enqueue` answers `{ added: false, reason }` while the stage has a job
 * waiting. A waiting flow child (a dispatch job by its producer id, without deduplication: C17)
 * holds neither a licence nor BullMQ's `de:` key, so the probe (src/lua/enqueue-probe.lua) finds
 * nothing and enqueue adds a second job: the stage is sent twice.
 */
const image: StageRef = { scope: ['flow-enqueue', 'ch-1'], stage: 'image' };

describe('C18: enqueue while a flow child of the stage waits', () => {
  it('C18: enqueue adds nothing while a flow child of the stage is waiting, and the stage is dispatched once', async () => {
    const h = harness();
    h.executor.fallback = SENT;
    const parentQueue = new Queue(`${h.queueName}-parent`, { connection: redisOptions(), prefix: h.prefix });
    const flows = new FlowProducer({ connection: redisOptions(), prefix: h.prefix });
    try {
      const child = readyJobId(stageId(image));
      await flows.add({
        name: 'render',
        queueName: parentQueue.name,
        data: {},
        children: [
          {
            name: 'image',
            queueName: h.queueName,
            data: { v: 1, scope: image.scope, stage: image.stage, payload: {} },
            opts: { jobId: child, attempts: 3 },
          },
        ],
      });
      const r = await h.engine.enqueue(image, {});
      const { done, failed } = watch(h.engine.createWorker());
      const jobs = r.added ? 2 : 1;
      await waitFor(() => done.length + failed.length >= jobs, 'the jobs settled', 5000);
      expect({ enqueue: r.added, calls: h.executor.callsFor(image) }).toEqual({ enqueue: false, calls: 1 });
    } finally {
      await flows.close();
      await parentQueue.close();
    }
  });
});
