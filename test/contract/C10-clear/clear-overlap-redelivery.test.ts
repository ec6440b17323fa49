import { UnrecoverableError } from 'bullmq';
import type { StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { crashAfterFail, latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * Two overlapping clears of one scope: the second's CLEAR_MARK overwrites the first's
 * mark (`sdq` = n2) before the first's CLEAR, which then ends the deferral and counts it (`W!`).
 * The promoted run begins (holding `W!`: no self-clear), fails for good, and its worker dies
 * between FAIL (`W!` -> `W?`) and BullMQ failing it. The redelivery takes its licence back as
 * bare `W` (the mark n2 is not '+'), then meets n2 with the second batch's pending count still
 * open: it "self-clears" and INCRs it. The second CLEAR adds it: one deferral, counted twice.
 */
const a: StageRef = { scope: ['r44-twice', 'ch-1'], stage: 'image' };
type Backend = { promote(id: string): Promise<void> };

it('C10: overlapping clears, the first recorded before the run and the second after a redelivery taking its licence back: one deferral counted once', async () => {
  const h = harness({ windows: { capacitySeconds: 300, idempotentSeconds: 300, jitter: 0 } });
  h.executor.script(a, notSent('no_worker_available'), new UnrecoverableError('downstream rejects the stage'), SENT);
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
  const [d] = await h.engine.listDeferred(a.scope);
  const wakeUp = d!.wakeUpJobId;
  // the first clear's promotion held once it ran; the second's held before it runs
  const backend = (h.engine.queue as unknown as { getBackend(): Backend }).getBackend();
  const real = backend.promote.bind(backend);
  const go1 = latch();
  const go2 = latch();
  let calls = 0;
  backend.promote = async (id: string) => {
    if (id !== wakeUp) return real(id);
    const n = ++calls;
    if (n === 1) {
      await real(id);
      await go1.opened;
    } else {
      await go2.opened;
      await real(id);
    }
  };
  let crash: ReturnType<typeof crashAfterFail> | undefined;
  try {
    const first = h.engine.clearDeferrals(['r44-twice']);
    await waitFor(() => calls === 1, 'the first clear to mark and promote');
    const second = h.engine.clearDeferrals(['r44-twice', 'ch-1']);
    // (it promotes once it marked: its mark overwrote the first's)
    await waitFor(() => calls === 2, 'the second clear to mark');
    go1.open();
    expect(await first).toBe(1);
    crash = crashAfterFail(h, (job) => job.id === wakeUp);
    const { crashed } = crash;
    await waitFor(() => crashed.job !== undefined, 'the promoted wake-up to fail for good, then crash', 15_000);
    await waitFor(() => h.executor.callsFor(a) === 3, 'the redelivered wake-up to reach its executor', 15_000);
    go2.open();
    // one deferral: the first clear counted it
    expect(await second).toBe(0);
  } finally {
    backend.promote = real;
    go1.open();
    go2.open();
    await crash?.worker.close();
  }
}, 30_000);
