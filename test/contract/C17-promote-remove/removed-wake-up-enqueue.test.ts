import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * An operator removes a deferred stage's wake-up in Bull Board
 * (job.remove()) while its window runs; the producer then enqueues the stage (its scheduler's
 * tick, or an event). C17: "a removed wake-up ... never blocks it for good"; C18: enqueue answers
 * `deferred` while the stage is deferred, i.e. a wake-up will run it. Expected: the stage is
 * dispatched once the window ends (by the enqueued job or otherwise). What the engine does: the
 * marker outlives its wake-up; enqueue answers `deferred` (nothing added) and nothing ever runs.
 */
const image: StageRef = { scope: ['removed', 'wake-up'], stage: 'image' };

describe('C17: a wake-up removed by hand, then the stage enqueued', () => {
  it("C17: the stage enqueued while its removed wake-up's window runs is dispatched after the window", async () => {
    const h = harness({ windows: { capacitySeconds: 1, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    const worker = h.engine.createWorker();
    const { done } = watch(worker);
    expect((await h.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    const [wakeUp] = await h.engine.queue.getDelayed();
    expect(wakeUp!.id).toMatch(/@cap\./);
    await wakeUp!.remove();
    const r = await h.engine.enqueue(image, {});
    // whatever the enqueue answered, the stage must go out once the window is over
    expect(r.reason === 'deferred' || r.added).toBe(true);
    await waitFor(() => h.executor.callsFor(image) === 2, 'the stage dispatched after its window', 6000).catch(
      () => undefined,
    );
    expect({ calls: h.executor.callsFor(image), done: done.length, enqueued: r }).toMatchObject({ calls: 2 });
  }, 20_000);
});
