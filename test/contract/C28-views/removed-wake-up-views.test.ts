import { harness, notSent } from '../../helpers/engine';
import type { StageRef } from '../../../src';

/**
 * Hostile review: a marker whose wake-up job is gone defers nothing (BATCH's begin deletes it and
 * proceeds; the enqueue probe ignores it). The views still read the marker alone: after Bull
 * Board's Delete of the wake-up, `isStageDeferred` and `listDeferred` say the stage is deferred
 * (until the window's end) while `dispatchStage` and `enqueue` treat it as not deferred. C28:
 * the views "read what is deferred"; C2: a deferred stage is not dispatched.
 */
const image: StageRef = { scope: ['views', 'removed'], stage: 'image' };

describe('C28: the views of a stage whose wake-up was removed', () => {
  it('C28: a stage whose wake-up was removed reads as not deferred, as enqueue and dispatchStage treat it', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    const [d] = await h.engine.listDeferred();
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.remove(); // Bull Board: Delete
    const views = { isDeferred: await h.engine.isStageDeferred(image), listed: (await h.engine.listDeferred()).length };
    // the engine's own verdict: the probe adds a job (nothing defers the stage)
    const enqueued = await h.engine.enqueue(image, {});
    expect({ ...views, enqueued: enqueued.added }).toEqual({ isDeferred: false, listed: 0, enqueued: true });
  });
});
