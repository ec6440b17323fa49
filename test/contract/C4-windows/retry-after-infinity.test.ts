import { expectWindowLeft, harness, notSent } from '../../helpers/engine';
import type { StageRef } from '../../../src';

/**
 * 's contract: "For a capacity outcome the window is `retryAfterMs` clamped to
 * [50 ms, the class's maximum] … a negative, NaN or non-number value is
 * `InvalidExecutorResultError`"; the README's semantics table says the same ("negative, NaN or not
 * a number"). `Infinity` is none of these (a downstream saying "not for a long while": a pool with
 * no ETA, `Number(retryAfter) * 1000` of a huge header), so it clamps to `capacityMaxSeconds`.
 * The engine refuses it instead (answerProblem: `!Number.isFinite`): the attempt is a real
 * failure, spends an attempt of the retry budget, and BullMQ's backoff asks the downstream again
 * after a second or so: long before the hint, the one thing the hint forbids.
 */
const a: StageRef = { scope: ['r32-inf', 'ch-1'], stage: 'image' };

describe('C4: retryAfterMs Infinity', () => {
  it('a capacity answer with retryAfterMs Infinity defers for the class maximum (it was InvalidExecutorResultError, a failure that asks again before the hint)', async () => {
    const h = harness({ windows: { capacitySeconds: 1, capacityMaxSeconds: 60, jitter: 0.2 } });
    h.executor.script(a, notSent('no_worker_available', { retryAfterMs: Number.POSITIVE_INFINITY }));
    const r = await h.engine.dispatchStage(a, {});
    expect(r).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(a));
    // the maximum, never more (the upward jitter is clamped too)
    expect(pttl).toBeGreaterThan(55_000);
    expectWindowLeft(pttl, 60_000);
  });
});
