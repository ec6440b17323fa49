import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * A producer keeps its completed jobs (`removeOnComplete: false`). A job of the stage ran on a
 * Worker and sent the stage: its release lands before BullMQ completes the job, so from the
 * completion on the shipped enqueue probe (a producer in another language runs it) calls the
 * stage free, as the engine's own enqueue does.
 */
const image: StageRef = { scope: ['book-32', 'ch-1', 'sc-1'], stage: 'image' };
const sid = stageId(image);
const PROBE = readFileSync(join(__dirname, '..', '..', '..', 'src', 'lua', 'enqueue-probe.lua'), 'utf8');

describe('C19: the enqueue probe after a job of the stage completed', () => {
  it('a kept job completed by its Worker: the shipped probe answers {0} at the completion, and enqueue adds a job that runs', async () => {
    const h = harness();
    const base = `${h.prefix}:${h.queueName}:`;
    const keys = [`${base}sd:deferred:${sid}`, `${base}sd:inflight:${sid}`, `${base}sd:licences`];
    const job = await h.engine.queue.add(
      'image',
      { v: 1, scope: image.scope, stage: image.stage, payload: {} },
      { jobId: readyJobId(sid), deduplication: { id: sid }, attempts: 3, removeOnComplete: false },
    );
    const worker = h.engine.createWorker();
    const probed: unknown[] = [];
    // read in the completed listener, right after BullMQ's completion
    worker.on('completed', () => void h.redis.eval(PROBE, 3, ...keys, sid).then((r) => probed.push(r)));
    const { done } = watch(worker);
    await waitFor(() => probed.length === 1, 'the job to complete');
    expect(done[0]).toEqual({ id: job.id, result: expect.objectContaining({ dispatched: true }) });
    expect(probed).toEqual([[0]]);
    const again = await h.engine.enqueue(image, {});
    expect(again).toMatchObject({ added: true, reason: null });
    expect(again.jobId).not.toBe(job.id);
    await waitFor(() => done.length === 2, 'the new job to complete');
    expect(done[1]).toEqual({ id: again.jobId, result: expect.objectContaining({ dispatched: true }) });
  });
});
