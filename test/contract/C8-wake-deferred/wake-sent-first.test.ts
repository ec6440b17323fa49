import type { StageRef } from '../../../src';
import { notSent, SENT } from '../../helpers/engine';
import { instrumentedHarness, wakeupsOf } from '../../helpers/metrics';

/**
 * A wake is reported by the process that woke the stage, once: a dispatch that then sends the
 * woken stage before its wake-up runs reports no second wake.
 */
const a: StageRef = { scope: ['r36-wake', 'ch-1'], stage: 'image' };

describe('C8: a woken stage that another call sends first is counted once', () => {
  it('a wakeDeferred in the instrumented process, then a direct dispatch that sends the stage: the wake is counted once, not again by the dispatch', async () => {
    const { h, reader, woken, done } = instrumentedHarness({ windows: { capacitySeconds: 300, jitter: 0 } });
    try {
      h.executor.script(a, notSent('no_worker_available'), SENT);
      expect(await h.engine.dispatchStage(a, {})).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
      const [wakeUp] = await h.engine.queue.getDelayed();
      expect(await h.engine.wakeDeferred({ stage: 'image' })).toEqual({ woken: [a] });
      expect((await h.engine.dispatchStage(a, {})).dispatched).toBe(true);
      expect(woken).toEqual([{ ref: a, jobId: wakeUp!.id, early: true }]);
      expect(await wakeupsOf(reader)).toEqual({ total: 1, early: 1 });
    } finally {
      await done();
    }
  });
});
