import type { StageRef } from '../../../src';
import { harness } from '../../helpers/engine';
import { deferOnce, latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * A wakeDeferred landing while a clear of the same stage is under way (its promotion held): each
 * ends a deferral by deleting its marker in one script, so one deferral, ended once, is counted
 * by one of the two calls only.
 */
const a: StageRef = { scope: ['r38-wake', 'ch-1'], stage: 'image' };

type Backend = { promote(id: string): Promise<void> };

it('C10: a wakeDeferred landing while a clear of the same stage is under way: the one deferral is counted once, by the clear that ended it (woken 0, cleared 1), and it is dispatched once', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  const wakeUp = await deferOnce(h, a);

  // the clear's promotion of the wake-up is held once it ran
  const backend = (h.engine.queue as unknown as { getBackend(): Backend }).getBackend();
  const real = backend.promote.bind(backend);
  const promoted = latch();
  const go = latch();
  let held = false;
  backend.promote = async (id: string) => {
    await real(id);
    if (held || id !== wakeUp) return;
    held = true;
    promoted.open();
    await go.opened;
  };
  try {
    const clearing = h.engine.clearDeferrals(['r38-wake']);
    await promoted.opened;
    // capacity has returned: the operator's wake lands while the clear is under way
    const { woken } = await h.engine.wakeDeferred({ scope: ['r38-wake'] });
    go.open();
    const cleared = await clearing;
    expect({ woken, cleared }).toEqual({ woken: [], cleared: 1 });
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    const worker = h.engine.createWorker();
    try {
      await waitFor(() => h.executor.callsFor(a) === 2, 'the promoted wake-up dispatched');
      await waitFor(
        async () => (await h.engine.queue.getJobs(['wait', 'delayed', 'active', 'prioritized'])).length === 0,
        'the queue to drain',
      );
    } finally {
      await worker.close();
    }
    expect(h.executor.callsOf(a).filter((c) => c.result?.dispatched)).toHaveLength(1);
  } finally {
    backend.promote = real;
    go.open();
  }
});
