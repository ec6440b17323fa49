import type { StageRef } from '../../../src';
import { harness } from '../../helpers/engine';
import { deferOnce, refuseButRun, watch } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';
import { replyDropProxy } from '../../helpers/proxy';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * Commit c274074 took back a refused promotion's mark, and told one whose run had counted
 * itself, in a script of its own sent with no key: on a Cluster it went to any node (where it
 * found nothing and answered nothing), and a reply of it lost with the connection could not be
 * answered again (its count already taken). Fixed: the batch's record does it, and a resend of
 * the record (its reply lost with the connection: ioredis resends it) answers the same, the
 * stage its run cleared included.
 *
 * Seen by a user: a clear whose only wake-up's promotion is refused, but which ran anyway (its
 * own timer, an operator's Promote) and ended its deferral, and whose record's reply is lost
 * through a reply-dropping proxy: the clear answers 1 (not `ClearIncompleteError` with the
 * stage reported not cleared), and the stage's next deferral is the first of a fresh chain.
 */
const a: StageRef = { scope: ['r46-resent', 'ch-1'], stage: 'image' };

it('C10: a clear whose refused wake-up ran anyway and whose record reply is lost (ioredis resends it) still answers that stage cleared', async () => {
  const p = await replyDropProxy();
  try {
    const h = harness({
      connection: { host: '127.0.0.1', port: p.port, password: redisOptions().password },
      windows: { capacitySeconds: 300, jitter: 0 },
    });
    // deferred; its wake-up's run (the one the refused promotion lets through) defers again
    await deferOnce(h, a, 2);
    const [d] = await h.engine.listDeferred(a.scope);
    const wa = d!.wakeUpJobId;
    const worker = h.engine.createWorker();
    const { done } = watch(worker);
    // refused both times, the first time run anyway; once the last refusal is made, the next EXEC
    // is the batch's record (nothing was promoted): its reply is lost with the connection
    const refusal = refuseButRun(h.engine.queue, wa, done, (n) => {
      if (n === 2) p.dropAfterExec();
    });
    let outcome: unknown;
    try {
      outcome = await h.engine.clearDeferrals(a.scope).then(
        (cleared) => ({ cleared }),
        (e: { cleared?: number; notCleared?: number; message: string }) => ({
          cleared: e.cleared,
          notCleared: e.notCleared,
        }),
      );
    } finally {
      refusal.restore();
      await worker.close();
    }
    expect(p.drops()).toBe(1);
    // the run ended its deferral for this clear: cleared, not reported refused
    expect(outcome).toEqual({ cleared: 1 });
    // its run was its only call, and it deferred again as the first of a fresh chain
    expect(h.executor.callsFor(a)).toBe(2);
    const again = await waitFor(() => listedDeferral(h.engine, a), 'the stage deferred again');
    expect(again.deferrals).toBe(1);
  } finally {
    await p.close();
  }
}, 30_000);
