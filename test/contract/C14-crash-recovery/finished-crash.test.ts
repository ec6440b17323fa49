import { Worker } from 'bullmq';
import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { sleep, watch } from '../../helpers/members';

/**
 * The processor marks a job added by hand `sdf` (FINISHED) *before* BullMQ
 * completes it, while it is still active. If the worker dies between the
 * two, BullMQ redelivers the job (stalled), and its begin reads `sdf` as "an
 * operator retried it by hand": it ignores `sds` (the deferral it recorded:
 * its wake-up carries the stage) and dispatches again. design.md, crash
 * table: "deferral recorded, before the job completed → ... one wake-up";
 * README: the only path that can repeat a successful dispatch is a crash
 * after the success was released.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C14: a job added by hand that deferred, its worker dead before BullMQ completed it', () => {
  it('its redelivery does not dispatch the stage a second time beside its wake-up', async () => {
    const h = harness({ windows: { capacitySeconds: 0.3, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT, SENT);
    await h.engine.queue.add('image', { v: 1, scope: image.scope, stage: image.stage, payload: {} }, { attempts: 3 });
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
