import { UnrecoverableError } from 'bullmq';
import type { StageRef } from '../../src';
import { harness, notSent } from '../helpers/engine';
import { crashAfterFail, holdPromotion } from '../helpers/jobs';
import { waitFor } from '../helpers/redis';

/**
 * Review 43. A promoted wake-up whose run begins before its batch's CLEAR clears itself and INCRs
 * the batch's pending count (licence -> `W!`). If that run fails for good and its worker dies
 * between the engine's FAIL (`W!` -> `W?`) and BullMQ failing it, the redelivery takes its licence
 * back as `W` (begin's "redelivered after its failed-for-good record" path) and then meets the
 * same `sdq` mark with the count still open: it clears itself and INCRs again. One deferral,
 * counted twice by the clear (2 for 1). On 86c4c8f^ the same run was counted nowhere (0): the
 * review 39 gap; the fix turned it into an overcount.
 */
const a: StageRef = { scope: ['r43-twice', 'ch-1'], stage: 'image' };

it('review 43, fixed: a self-cleared wake-up redelivered after a crash between FAIL and BullMQ failing it is not counted a second time by the clear, and keeps the fresh chain', async () => {
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
  const { go, restore } = holdPromotion(h.engine.queue, wakeUp);
  const { worker, crashed } = crashAfterFail(h, (job) => job.id === wakeUp);
  try {
    const clearing = h.engine.clearDeferrals(['r43-twice']);
    await waitFor(() => crashed.job !== undefined, 'the promoted wake-up to fail for good, then crash', 15_000);
    // the redelivery runs once more (its begin before the clear's CLEAR)
    await waitFor(() => h.executor.callsFor(a) === 3, 'the redelivered wake-up to reach its executor', 15_000);
    go.open();
    // one deferral, one clear
    expect(await clearing).toBe(1);
    // and the redelivery, which deferred again, went on with the chain the clear began afresh
    await waitFor(async () => (await h.engine.listDeferred(a.scope)).length === 1, 'the redelivery to defer');
    const [after] = await h.engine.listDeferred(a.scope);
    expect(after).toMatchObject({ deferrals: 1 });
  } finally {
    restore();
    await worker.close();
  }
}, 30_000);
