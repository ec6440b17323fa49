import { FlowProducer, Queue, QueueEvents } from 'bullmq';
import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { redisOptions, waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * A BullMQ user puts the dispatch job inside a flow: a parent job (in another queue) that must run
 * only once its children are done. BullMQ allows no deduplication on a job with a parent, so a
 * cancel or an enqueue could not find such a child while it waits (C9, C18): it is refused, under
 * any id, saying what to do instead.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C17: a dispatch job as a child of a flow', () => {
  it.each([
    ['under a producer id', true],
    ['under an id of its own', false],
  ])('%s is refused at once with INVALID_JOB_OPTIONS, never dispatched', async (_n, producerId) => {
    const h = harness();
    h.executor.fallback = SENT;
    const parentQueue = new Queue(`${h.queueName}-parent`, { connection: redisOptions(), prefix: h.prefix });
    const flows = new FlowProducer({ connection: redisOptions(), prefix: h.prefix });
    try {
      const { failed } = watch(h.engine.createWorker());
      const flow = await flows.add({
        name: 'render-scene',
        queueName: parentQueue.name,
        data: {},
        children: [
          {
            name: 'image',
            queueName: h.queueName,
            data: { v: 1, scope: image.scope, stage: image.stage, payload: {} },
            opts: producerId ? { jobId: readyJobId(stageId(image)), attempts: 3 } : {},
          },
        ],
      });
      await waitFor(() => failed.length === 1, 'the child failed');
      expect(failed[0]!.error).toMatchObject({ code: 'INVALID_JOB_OPTIONS' });
      if (producerId) expect(String(failed[0]!.error)).toMatch(/is a flow's child, which BullMQ cannot deduplicate/);
      expect(h.executor.calls).toHaveLength(0);
      expect(await parentQueue.getJobState(flow.job.id!)).toBe('waiting-children');
    } finally {
      await flows.close();
      await parentQueue.close();
    }
  });
});

describe('C17: QueueEvents of a deferral', () => {
  it('documented (README, "listens on BullMQ\'s QueueEvents"): a deferred dispatch job is a `completed` event whose returnvalue says dispatched: false', async () => {
    const h = harness({ windows: { capacitySeconds: 30, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    const events = new QueueEvents(h.queueName, { connection: redisOptions(), prefix: h.prefix });
    try {
      await events.waitUntilReady();
      const seen: { event: string; jobId: string; returnvalue?: unknown }[] = [];
      events.on('completed', ({ jobId, returnvalue }) => seen.push({ event: 'completed', jobId, returnvalue }));
      events.on('failed', ({ jobId }) => seen.push({ event: 'failed', jobId }));
      const { jobId } = await h.engine.enqueue(image, {});
      h.engine.createWorker();
      await waitFor(() => seen.length >= 1, 'an event', 5000);
      expect(seen[0]!.jobId).toBe(jobId);
      expect(stageId(image)).toBe('book-1/ch-2/sc-7/image');
      // a BullMQ user reading `completed` as "done" must read the returnvalue: not dispatched, deferred
      expect(seen[0]).toMatchObject({
        event: 'completed',
        returnvalue: { dispatched: false, reason: 'no_worker_available', retryable: true },
      });
    } finally {
      await events.close();
    }
  });
});
