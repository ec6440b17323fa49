import { FlowProducer, QueueEvents, Worker } from 'bullmq';
import { harness, notSent, SENT } from '../../helpers/engine';
import { client, redisOptions, waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';

/**
 * A BullMQ user puts the dispatch job inside a flow: a parent job (in another queue) that must run
 * only once its children are done. BullMQ moves the parent on when the child *completes*; a
 * deferral completes the dispatch job (no attempt spent), and the wake-up that carries the stage
 * is no child of that parent.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C17: a dispatch job as a child of a flow', () => {
  it('documented (README, "puts a dispatch job in a flow"): the parent runs once the child deferred, before the stage was dispatched; the child value says dispatched: false', async () => {
    const h = harness({ windows: { capacitySeconds: 1, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    const parentQueue = `${h.queueName}-parent`;
    const order: string[] = [];
    const parentWorker = new Worker(
      parentQueue,
      async (job) => {
        order.push(
          `parent ran (executor calls: ${h.executor.calls.length}, sent: ${h.executor.calls.filter((c) => c.result?.dispatched).length})`,
        );
        return job.getChildrenValues();
      },
      { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix },
    );
    const flows = new FlowProducer({ connection: redisOptions(), prefix: h.prefix });
    try {
      const worker = h.engine.createWorker();
      const parentDone = new Promise<Record<string, unknown>>((resolve) =>
        parentWorker.on('completed', (_job, value) => resolve(value as Record<string, unknown>)),
      );
      await flows.add({
        name: 'render-scene',
        queueName: parentQueue,
        data: {},
        children: [
          {
            name: 'image',
            queueName: h.queueName,
            data: { v: 1, scope: image.scope, stage: image.stage, payload: {} },
            opts: { failParentOnFailure: true },
          },
        ],
      });
      const children = await parentDone;
      await waitFor(() => h.executor.calls.length === 2, 'the wake-up dispatched the stage', 5000);
      await worker.close();
      // a deferral completes the child: the parent ran after the first call, which sent nothing
      expect(order).toEqual(['parent ran (executor calls: 1, sent: 0)']);
      expect(Object.values(children)[0]).toMatchObject({
        dispatched: false,
        reason: 'no_worker_available',
        retryable: true,
      });
    } finally {
      await parentWorker.close();
      await flows.close();
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
