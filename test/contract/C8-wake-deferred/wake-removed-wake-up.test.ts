import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';

/**
 * A wake-up removed by hand (Bull Board "Remove") while its marker still
 * stands. WAKE (src/lua/scripts.ts) picks stages by their marker alone; the engine then
 * promotes the wake-up and swallows the failure (src/deferral-store.ts `wake`:
 * `.catch(() => undefined)`). The stage is reported woken, a `woken` event is emitted, and
 * the `limit` is spent on a stage nothing will run, while a stage with a live wake-up stays
 * deferred for its full window: the capacity signal is consumed by nothing.
 */
const a: StageRef = { scope: ['s', 'a'], stage: 'image' };
const b: StageRef = { scope: ['s', 'b'], stage: 'image' };

describe('C8: wakeDeferred and a wake-up removed by hand', () => {
  it.each([
    ['by kind', { stage: 'image' }],
    ['unfiltered', {}],
    ['by scope', { scope: ['s'] }],
  ])(
    '(%s): a stage whose wake-up is gone is skipped and not counted: limit 1 wakes the stage with a live wake-up',
    async (_n, filter) => {
      const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
      h.executor.fallback = notSent('no_worker_available');
      await h.engine.dispatchStage(a, {}); // a waits longest
      await h.engine.dispatchStage(b, {});
      const [la] = await h.engine.listDeferred(['s', 'a']);
      expect(await h.engine.queue.remove(la!.wakeUpJobId)).toBe(1);
      const { woken } = await h.engine.wakeDeferred({ ...filter, limit: 1 });
      // the one slot that freed should reach a stage that can use it
      expect({ woken, bDeferred: await h.engine.isStageDeferred(b) }).toEqual({ woken: [b], bDeferred: false });
    },
  );
});
