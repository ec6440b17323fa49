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
 * the stage ran on a Worker and sent the stage: BullMQ completed it, while
 * the success's release (it rides in a later batch) is held back here. The
 * stage lock lives until that release lands: the shipped enqueue probe calls
 * the stage in flight, as the engine's own scripts do, and free once it landed.
 */
const image: StageRef = { scope: ['book-32', 'ch-1', 'sc-1'], stage: 'image' };
const sid = stageId(image);
const PROBE = readFileSync(join(__dirname, '..', '..', '..', 'src', 'lua', 'enqueue-probe.lua'), 'utf8');

describe('C19: the enqueue probe after a job of the stage completed', () => {
  it('a kept job completed by its Worker: the shipped probe answers {2} (in flight) until the success’s release lands, then {0}, and enqueue adds a job', async () => {
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

      // a producer in another language runs the shipped probe: in flight, as the engine says
      const base = `${h.prefix}:${h.queueName}:`;
      const keys = [`${base}sd:deferred:${sid}`, `${base}sd:inflight:${sid}`, `${base}sd:licences`];
      expect(await h.redis.eval(PROBE, 3, ...keys, sid)).toEqual([2]);
      expect(await h.engine.enqueue(image, {})).toMatchObject({ added: false, reason: 'dispatch_in_flight' });
      // the release lands: nothing pending, and the engine's enqueue adds a job that runs the stage
      landed.open();
      await waitFor(async () => ((await h.redis.eval(PROBE, 3, ...keys, sid)) as number[])[0] === 0, "the release landed");
      const again = await h.engine.enqueue(image, {});
      expect(again).toMatchObject({ added: true, reason: null });
      expect(again.jobId).not.toBe(job.id);
      await waitFor(() => done.length === 2, 'the new job to complete');
      expect(done[1]).toEqual({ id: again.jobId, result: expect.objectContaining({ dispatched: true }) });
    } finally {
      landed.open();
      restore();
    }
  }, 30_000);
});
