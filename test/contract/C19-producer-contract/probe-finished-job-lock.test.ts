import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import { waitFor } from '../../helpers/redis';
import { stageId, type StageRef } from '../../../src';

/**
 * A producer keeps its completed jobs (`removeOnComplete: false`). A job of the stage ran on a
 * Worker and sent the stage: its success's release is awaited before BullMQ completes the job,
 * so at the completion the shipped enqueue probe, as the engine's own scripts, finds the stage free.
 */
const image: StageRef = { scope: ['book-32', 'ch-1', 'sc-1'], stage: 'image' };
const sid = stageId(image);
const PROBE = readFileSync(join(__dirname, '..', '..', '..', 'src', 'lua', 'enqueue-probe.lua'), 'utf8');

describe('C19: the enqueue probe after a job of the stage completed', () => {
  it('a kept job completed by its Worker: the shipped probe answers {0} at the completion, and enqueue adds a job', async () => {
    const h = harness();
    const job = await addProducerJob(h.engine.queue, image, { attempts: 3, removeOnComplete: false });
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the job to complete');
    expect(done[0]).toEqual({ id: job.id, result: expect.objectContaining({ dispatched: true }) });
    expect(await h.engine.queue.getJobState(job.id!)).toBe('completed');
    // a producer in another language runs the shipped probe: nothing pending, nothing in flight
    const base = `${h.prefix}:${h.queueName}:`;
    const keys = [`${base}sd:deferred:${sid}`, `${base}sd:inflight:${sid}`, `${base}sd:licences`];
    expect(await h.redis.eval(PROBE, 3, ...keys, sid)).toEqual([0]);
    const again = await h.engine.enqueue(image, {});
    expect(again).toMatchObject({ added: true, reason: null });
    expect(again.jobId).not.toBe(job.id);
    await waitFor(() => done.length === 2, 'the new job to complete');
    expect(done[1]).toEqual({ id: again.jobId, result: expect.objectContaining({ dispatched: true }) });
  });
});
