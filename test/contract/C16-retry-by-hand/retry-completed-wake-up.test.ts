import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * C16: Retry of a kept completed job dispatches the stage with a fresh chain unless it is
 * deferred, in flight, was cancelled or superseded. A wake-up that itself dispatched the stage
 * (it never deferred) is such a kept completed job, the one Bull Board shows last for the stage.
 */
describe('C16: Retry of a kept completed wake-up that dispatched the stage', () => {
  it('C16: dispatches the idle stage again', async () => {
    const h = harness({ removeOnComplete: false, windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT, SENT);
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    const { done } = watch(h.engine.createWorker({ concurrency: 1 }));
    await waitFor(() => done.length === 2 || null, 'the deferral and the wake-up that sent the stage');
    const wakeUp = done[1]!;
    expect(wakeUp.result).toMatchObject({ dispatched: true });
    expect(await h.engine.isStageDeferred(image)).toBe(false);

    await (await h.engine.queue.getJob(wakeUp.id))!.retry('completed', { resetAttemptsMade: true });
    await waitFor(() => done.length === 3 || null, 'the retried wake-up ran');
    expect(done[2]).toMatchObject({ id: wakeUp.id, result: { dispatched: true } });
    expect(h.executor.calls).toHaveLength(3);
  });
});
