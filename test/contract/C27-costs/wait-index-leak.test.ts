import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * Design.md: a stage is in `sd:wq:<kind>` "from that deferral until the chain ends
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
    const wq = `${h.prefix}:${h.queueName}:sd:wq:image`;
    const sid = 'r32-leak/ch-1/image';
    expect(await h.redis.zscore(wq, sid)).not.toBeNull();
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
    // the chain ended with a success: nothing of the stage is waiting (once the success's
    // release, lazy here (no licence left), has landed: it rides the next batch within 100 ms)
    await waitFor(
      async () => (await h.redis.get(`${h.prefix}:${h.queueName}:sd:inflight:${sid}`)) === null,
      'the release',
    );
    expect(await h.redis.zscore(wq, sid)).toBeNull();
    await worker.close();
  });
});
