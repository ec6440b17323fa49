import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * C16: a wake-up carries its stage only while its deferral lasts. Kept in the Completed tab
 * (`removeOnComplete`) after it sent the stage, and retried there, it is a wake-up of a deferral
 * that is over: it completes as `stale_wake_up` and sends nothing (enqueue the stage to send it
 * again). The same rule keeps a stray wake-up from sending a stage twice.
 */
describe('C16: Retry of a kept completed wake-up that dispatched the stage', () => {
  it('C16: sends nothing: it completes as stale_wake_up', async () => {
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
    expect(done[2]).toMatchObject({ id: wakeUp.id, result: { dispatched: false, reason: 'stale_wake_up' } });
    expect(h.executor.calls).toHaveLength(2);
  });
});
