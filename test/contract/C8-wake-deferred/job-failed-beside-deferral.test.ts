import { harness, notSent } from '../../helpers/engine';
import { fetchBy, watch } from '../../helpers/jobs';
import { failedRecordsOf } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A stage is capacity-deferred (its wake-up holds the licence) while an older job of it, taken by a
 * worker that froze before its begin, is failed for good by BullMQ's stalled check on an attached
 * Worker (the engine records the failure: fail.lua). That job never carried the stage: the
 * deferral's chain goes on, and `wakeDeferred` still finds the stage and wakes it (C8).
 */
const image: StageRef = { scope: ['book-43', 'ch-1', 'sc-1'], stage: 'image' };

describe('C8: a job failing for good while another job holds its stage', () => {
  it("C8: the stage's capacity deferral stays wakeable: wakeDeferred wakes it and its wake-up sends the stage", async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    // an enqueued job, taken by a worker that freezes before its begin (BullMQ's lock: 300 ms)
    const { jobId } = await h.engine.enqueue(image, {});
    const frozen = await fetchBy(h, 'frozen-token', 300);
    expect(frozen.id).toBe(jobId);
    // meanwhile a direct call defers the stage: its wake-up holds the licence
    expect((await h.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    // an attached Worker's stalled check fails the frozen job for good (maxStalledCount 0)
    const worker = h.engine.createWorker({ stalledInterval: 200, maxStalledCount: 0 });
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'BullMQ failed the stalled job', 10_000);
    await waitFor(async () => (await failedRecordsOf(h.redis, h, image)).length === 1, 'the failure recorded');
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    expect((await h.engine.wakeDeferred({ stage: image.stage })).woken).toEqual([image]);
    await waitFor(() => done.length === 1, 'the wake-up ran', 10_000);
    expect({ reason: done[0]!.result.reason, calls: h.executor.callsFor(image) }).toEqual({ reason: null, calls: 2 });
  }, 30_000);
});
