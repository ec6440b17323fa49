import { harness, notSent } from '../../helpers/engine';

/**
 * The idempotent bound reached by direct calls (no worker): the stage completes as done, the
 * wake-up of its last deferral is gone, and the chain is over: the next idempotent answer
 * starts a fresh chain (it defers again).
 */
const image = { scope: ['book-1', 'ch-2', 'sc-9'], stage: 'image' };

describe('C7: the idempotent bound ends the chain', () => {
  it('C7: past maxIdempotentDeferrals a direct dispatch completes as done, leaves no wake-up, and the next answer starts a fresh chain', async () => {
    // (a window of 10 min, ended by hand where the test needs it over: the fresh chain's deferral is
    // still open when the test reads it, however slow the machine)
    const h = harness({ windows: { idempotentSeconds: 600, jitter: 0 }, limits: { maxIdempotentDeferrals: 1 } });
    h.executor.fallback = notSent('already_completed');
    const first = await h.engine.dispatchStage(image, {});
    expect(first).toMatchObject({ dispatched: false, reason: 'already_completed' });
    expect(await h.engine.queue.getJobCounts('delayed')).toEqual({ delayed: 1 });
    // the window ends (its marker expires, as PX does at its end)
    await h.redis.del(h.engine.deferredStageKey(image));
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    const bound = await h.engine.dispatchStage(image, {});
    expect(bound).toMatchObject({ dispatched: false, completed: true });
    // no further wake-up: the last deferral's is removed with its chain
    expect(await h.engine.queue.getJobCounts('delayed', 'wait')).toEqual({ delayed: 0, wait: 0 });
    // a fresh chain: the next idempotent answer defers again
    const fresh = await h.engine.dispatchStage(image, {});
    expect(fresh).toMatchObject({ dispatched: false, reason: 'already_completed' });
    expect(fresh.completed).toBeUndefined();
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    expect(h.executor.calls).toHaveLength(3);
  });
});
