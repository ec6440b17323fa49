import { Worker } from 'bullmq';
import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { sleep, watch } from '../../helpers/members';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A job defers (its wake-up carries the stage) and its worker dies before BullMQ completed it:
 * BullMQ redelivers the job (stalled). design.md, crash table: "deferral recorded, before the
 * job completed → ... one wake-up": the redelivery must not dispatch the stage a second time.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C14: a producer job that deferred, its worker dead before BullMQ completed it', () => {
  it('its redelivery does not dispatch the stage a second time beside its wake-up', async () => {
    const h = harness({ windows: { capacitySeconds: 0.3, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT, SENT);
    await addProducerJob(h.engine.queue, image);
    // the worker that takes it (its own Worker, the engine's processor) dies after the processor returned
    const dying = new Worker(h.queueName, undefined, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      autorun: false,
      lockDuration: 1000,
    });
    try {
      const job = (await dying.getNextJob('dying'))!;
      const r = (await h.engine.processor(job, 'dying')) as { reason: string };
      expect(r.reason).toBe('no_worker_available'); // deferred; then the process is gone
      const { done } = watch(h.engine.createWorker({ stalledInterval: 500 }));
      await waitFor(() => done.length === 2, 'the wake-up ran, and the stalled job was redelivered', 15_000);
      await sleep(200);
      expect(h.executor.calls.filter((c) => c.ref.stage === 'image')).toHaveLength(2);
    } finally {
      await dying.close(true);
    }
  });
});
