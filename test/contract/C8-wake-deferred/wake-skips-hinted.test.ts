import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';

/** A downstream's retryAfterMs says "not before": wakeDeferred leaves such a deferral asleep. */
const ref = (book: string, stage = 'image'): StageRef => ({ scope: [book, 'ch'], stage });
const NO = notSent('no_worker_available');
const HINT = notSent('no_worker_available', { retryAfterMs: 60_000 });

describe('C8: wakeDeferred never wakes a deferral the downstream hinted', () => {
  it.each([
    ['no filter', {}],
    ['by stage kind', { stage: 'image' }],
    ['by scope', { scope: ['a'] }],
  ])('%s: limit 1 wakes the plain capacity deferral, not the older hinted one', async (_n, filter) => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    const hinted = ref('a');
    const plain = { scope: ['a', 'ch2'], stage: 'image' };
    h.executor.script(hinted, HINT);
    h.executor.script(plain, NO);
    // the hinted chain began first: oldest-first alone would pick it
    await h.engine.dispatchStage(hinted, {});
    await h.engine.dispatchStage(plain, {});
    expect((await h.engine.wakeDeferred({ ...filter, limit: 1 })).woken).toEqual([plain]);
    expect(await h.engine.isStageDeferred(hinted)).toBe(true);
    expect(await h.engine.isStageDeferred(plain)).toBe(false);
  });

  it('a chain hinted after plain deferrals leaves the line; its next plain deferral joins it again', async () => {
    const h = harness({ windows: { capacitySeconds: 60, capacityMaxSeconds: 600, jitter: 0 } });
    const a = ref('a');
    h.executor.script(a, NO, HINT, NO);
    await h.engine.dispatchStage(a, {});
    await h.redis.del(h.engine.deferredStageKey(a));
    await h.engine.dispatchStage(a, {}); // hinted: 60 s
    expect((await h.engine.wakeDeferred()).woken).toEqual([]);
    await h.redis.del(h.engine.deferredStageKey(a));
    await h.engine.dispatchStage(a, {}); // plain again
    expect((await h.engine.wakeDeferred()).woken).toEqual([a]);
  });
});
