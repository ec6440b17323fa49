import { InvalidOptionsError, type StageRef } from '../../../src';
import { expectUnwritten, harness, notSent, snapshot } from '../../helpers/engine';

/**
 * README: `wakeDeferred({ limit = 1, scope?, stage? })`; "An unknown filter key is
 * `InvalidOptionsError`", and bad input is "rejected before anything is called or written".
 * src/engine.ts guards the filter with `typeof filter !== 'object' || filter === null` and
 * `Object.keys(filter)`: an array passes as an object, and an empty one has no keys. A caller
 * that hands `wakeDeferred` a scope as it hands one to `clearDeferrals` (`wakeDeferred(scope)`,
 * the scope computed as `[]` for "the whole book list") is not refused: the call wakes one
 * capacity-deferred stage of any kind and any scope (the WAKE script deletes its marker, bumps
 * the wake sequence, promotes its wake-up). `clearDeferrals([])` and `wakeDeferred({ scope: [] })`
 * are refused (INVALID_STAGE_REF), and `wakeDeferred(['book-1'])` is refused (key "0"); only the
 * empty array slips through and writes. (TypeScript's weak-type check refuses `[]` at compile
 * time; a JavaScript caller, or one through `any`, is not refused at run time, where the guard is.)
 */
const a: StageRef = { scope: ['r34-array', 'ch-1'], stage: 'image' };

describe('C8: wakeDeferred given an array', () => {
  it('wakeDeferred([]) is InvalidOptionsError and writes nothing', async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(a, {});
    const before = await snapshot(h.redis, h.prefix);
    const wake = h.engine.wakeDeferred as (filter: unknown) => Promise<{ woken: StageRef[] }>;
    await expect(wake([])).rejects.toBeInstanceOf(InvalidOptionsError);
    expect(await h.engine.isStageDeferred(a)).toBe(true);
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
  });
});
