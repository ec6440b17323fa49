import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { harness } from '../../helpers/engine';
import { wrapBatch } from '../../helpers/faults';
import { latch, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * A producer keeps its completed jobs (`removeOnComplete: false`). A job of
 * the stage ran on a Worker and sent the stage: BullMQ completed it. Its
 * attempt's lock, tied to the job, is dead from then on (the job finished and
 * was not handed on: its stalled count is the one the attempt began with),
 * even while the lock's key is still there (the success's release rides in a
 * later batch, held back here). The shipped enqueue probe must call the stage
 * free, as the engine's own scripts do: a new enqueue adds a job, it is not
 * dropped as `dispatch_in_flight`.
 */
const image: StageRef = { scope: ['book-32', 'ch-1', 'sc-1'], stage: 'image' };
const sid = stageId(image);
const PROBE = readFileSync(join(__dirname, '..', '..', '..', 'src', 'lua', 'enqueue-probe.lua'), 'utf8');

describe('C19: the enqueue probe after a job of the stage completed', () => {
  it('a kept job completed by its Worker (stalled count unchanged) leaves the stage free: the shipped probe answers {0} and enqueue adds a job while the success’s release has not landed yet', async () => {
    const h = harness();
    // the success's release (a batch that carries it) is held until the enqueue answered
    const landed = latch();
    let held = 0;
    const restore = await wrapBatch(h.engine, (send) => async (...args: unknown[]) => {
      if (args.includes('z')) {
        held += 1;
        await landed.opened;
      }
      return send(...args);
    });
    try {
      const job = await h.engine.queue.add(
        'image',
        { v: 1, scope: image.scope, stage: image.stage, payload: {} },
        { jobId: readyJobId(sid), deduplication: { id: sid }, attempts: 3, removeOnComplete: false },
      );
      const { done } = watch(h.engine.createWorker());
      await waitFor(() => done.length === 1, 'the job to complete');
      expect(done[0]).toEqual({ id: job.id, result: expect.objectContaining({ dispatched: true }) });
      expect(await h.engine.queue.getJobState(job.id!)).toBe('completed');
      await waitFor(() => held === 1, 'the success’s release to be under way');

      // a producer in another language runs the shipped probe: nothing pending
      const base = `${h.prefix}:${h.queueName}:`;
      const keys = [`${base}sd:deferred:${sid}`, `${base}sd:inflight:${sid}`, `${base}sd:licences`];
      expect(await h.redis.eval(PROBE, 3, ...keys, sid)).toEqual([0]);
      // the engine's enqueue adds a job
      const again = await h.engine.enqueue(image, {});
      expect(again).toMatchObject({ added: true, reason: null });
      expect(again.jobId).not.toBe(job.id);
      // and that job runs the stage again once the release landed
      landed.open();
      await waitFor(() => done.length === 2, 'the new job to complete');
      expect(done[1]).toEqual({ id: again.jobId, result: expect.objectContaining({ dispatched: true }) });
    } finally {
      landed.open();
      restore();
    }
  }, 30_000);
});
