import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';
import type { StageRef } from '../../../src';

/**
 * Design.md: a stage is in its kind's wait index "from that deferral until the chain ends
 * (success, cancel, clear, a terminal failure)". An operator removes the wake-up (Bull Board's
 * Remove; README: "the next enqueue after that adds a job"), the marker goes (expired, or deleted
 * by hand), and the next enqueue's job sends the stage: the chain has ended with a success, yet the
 * stage stays in its kind's wait index for good (the enqueue probe drops the licence whose job is
 * gone, so the success's release revokes nothing, and only a release that revoked something
 * unwaits). Every later `wakeDeferred` without a scope walks past it, and the index grows with
 * every such stage: a leak.
 */
const image = (book: string): StageRef => ({ scope: [book, 'ch-1'], stage: 'image' });

describe('C27: the wait index after a wake-up removed by hand', () => {
  it('a stage whose wake-up was removed by hand and that was then sent by an enqueued job leaves its kind’s wait index', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    const a = image('r32-leak');
    h.executor.script(a, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(a, {});
    // deferred: the engine keeps its marker and what it needs to wake it (wakeDeferred)
    expect(await h.engine.isStageDeferred(a)).toBe(true);
    expect(await keptFor(h, a)).not.toEqual([]);
    const [d] = await h.engine.listDeferred();
    // the operator removes the wake-up; the marker then lapses (deleted here: the same state)
    expect(await h.engine.queue.remove(d!.wakeUpJobId)).toBe(1);
    await h.redis.del(h.engine.deferredStageKey(a));
    const queued = await h.engine.enqueue(a, {});
    expect(queued.added).toBe(true);
    const worker = h.engine.createWorker();
    const { done } = watch(worker);
    await waitFor(() => done.length === 1, 'the enqueued job ran');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    // the chain ended with a success: nothing of the stage is kept, nor waits to be woken
    // (once the success's release, lazy here (no licence left), has landed: it rides the next
    // batch within 100 ms); the leak kept the stage in its kind's wait index for good
    await waitFor(async () => (await keptFor(h, a)).length === 0, 'nothing of the stage kept', 3000).catch(async () =>
      expect(await keptFor(h, a)).toEqual([]),
    );
    expect(await h.engine.wakeDeferred()).toEqual({ woken: [] });
    await worker.close();
  });
});
