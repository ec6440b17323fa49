import { FlowProducer, Queue } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { redisOptions, waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * Hostile review: a flow's child is a dispatch job by its producer id alone (no deduplication:
 * BullMQ refuses it with a parent, C17). C9 promises a cancel "removes ... a waiting job" of the
 * stage and that nothing dispatches it afterwards. A waiting flow child holds no licence and no
 * `de:` key, so CANCEL (src/lua/cancel.lua) finds nothing of it.
 */
const image: StageRef = { scope: ['flow-cancel', 'ch-1'], stage: 'image' };

describe('C9: a cancel and a waiting flow child', () => {
  it('C9: a cancel reaches a waiting flow child of the stage: the stage is not dispatched afterwards', async () => {
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
      expect(await h.engine.queue.getJobState(child)).toBe('waiting');
      await h.engine.cancelStage(image);
      const { done, failed } = watch(h.engine.createWorker());
      // the child is either gone or ends without sending the stage
      await waitFor(
        async () => done.length + failed.length > 0 || !(await h.engine.queue.getJob(child)),
        'the child settled or removed',
        5000,
      );
      expect({ calls: h.executor.callsFor(image), results: done.map((d) => d.result) }).toEqual({
        calls: 0,
        results: done.map(() => expect.objectContaining({ dispatched: false })),
      });
    } finally {
      await flows.close();
      await parentQueue.close();
    }
  });
});
