import { UnrecoverableError } from 'bullmq';
import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { crashAfterFail, holdPromotion } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * A clear ends a wake-up W's chain (`W!`), either by its CLEAR (the ordinary
 * order) or by W's run that began first and cleared its own stage. If that run fails for good and
 * its worker dies between the engine's FAIL (`W!` -> `W?`: the record cannot keep the `!`) and
 * BullMQ failing it, the redelivery takes its licence back. It took back `W` and, its
 * clear's mark still unused, cleared its stage and counted itself a second time (2 for 1).
 * After a CLEAR that ran first, it took back `W` and went on with the chain the clear
 * had ended (its next deferral the chain's second, `@cap.2.`). Fixed: the job's hash keeps that
 * its run held `!` (`sdq` ending in `+`), and the redelivery takes back `W!`.
 */
const a: StageRef = { scope: ['r43-twice', 'ch-1'], stage: 'image' };

it.each([
  ['its run began before the clear recorded it; not counted a second time', false],
  ['the clear recorded it before its run began', true],
])(
  'C10: a cleared wake-up redelivered after a crash between FAIL and BullMQ failing it: counted once, and the redelivery stays on the fresh chain; %s',
  async (_what, clearFirst) => {
    const h = harness({ windows: { capacitySeconds: 300, idempotentSeconds: 300, jitter: 0 } });
    h.executor.script(
      a,
      notSent('no_worker_available'),
      new UnrecoverableError('downstream rejects the stage'),
      notSent('no_worker_available'),
    );
    expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
    const [d] = await h.engine.listDeferred(a.scope);
    const wakeUp = d!.wakeUpJobId;
    expect(wakeUp).toMatch(/@cap\.1\.0\.0\./);
    // held after its promotion until the redelivery reached its executor, or not held at all
    const { go, restore } = holdPromotion(h.engine.queue, clearFirst ? '' : wakeUp);
    const clearing = h.engine.clearDeferrals(['r43-twice']);
    if (clearFirst) expect(await clearing).toBe(1);
    const { worker, crashed } = crashAfterFail(h, (job) => job.id === wakeUp);
    try {
      await waitFor(() => crashed.job !== undefined, 'the promoted wake-up to fail for good, then crash', 15_000);
      await waitFor(() => h.executor.callsFor(a) === 3, 'the redelivered wake-up to reach its executor', 15_000);
      go.open();
      // one deferral, one clear
      expect(await clearing).toBe(1);
      await waitFor(
        async () => (await h.engine.listDeferred(a.scope)).some((s) => s.wakeUpJobId !== wakeUp),
        'the redelivery to defer again',
        15_000,
      );
      // the clear ended the first chain: this deferral is the first of a fresh one
      const [after] = await h.engine.listDeferred(a.scope);
      expect(after).toMatchObject({ deferrals: 1 });
      expect(after!.wakeUpJobId).toMatch(/@cap\.1\.0\.0\./);
    } finally {
      restore();
      await worker.close();
    }
  },
  30_000,
);
