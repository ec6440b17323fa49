import type { StageRef } from '../../../src';
import { harness } from '../../helpers/engine';
import { deferOnce, latch } from '../../helpers/jobs';

/**
 * A clear reads a batch's markers (MGET), promotes the wake-ups, then runs CLEAR, which
 * counts a wake-up as cleared when its marker still names it OR its licence is still its own
 * (`ZREM ... == 1`: "the promoted wake-up already began and removed its marker itself"). A
 * wakeDeferred landing between the promotion and the CLEAR deletes the marker and leaves the
 * licence alone: the wake reports the stage woken, and the CLEAR, finding the licence, reports it
 * cleared too. One deferral, ended once, is counted by both calls.
 */
const a: StageRef = { scope: ['r38-wake', 'ch-1'], stage: 'image' };

type Backend = { promote(id: string): Promise<void> };

it('C10: a clear racing wakeDeferred on the same stage: the one deferral is counted once across both (woken + cleared = 1)', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  const wakeUp = await deferOnce(h, a);

  // the clear's promotion of the wake-up is held once it ran (the CLEAR not sent yet)
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
    // capacity has returned: the operator's wake lands between the clear's promote and its CLEAR
    const { woken } = await h.engine.wakeDeferred({ scope: ['r38-wake'] });
    go.open();
    const cleared = await clearing;
    // one of the two ended it (either answer is fine), never both
    expect({ woken: woken.length, cleared, total: woken.length + cleared }).toEqual(
      expect.objectContaining({ total: 1 }),
    );
  } finally {
    backend.promote = real;
    go.open();
  }
});
