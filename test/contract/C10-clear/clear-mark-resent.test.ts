import type { StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';
import { CMD } from '../../../src/store/client';
import { harness } from '../../helpers/engine';
import { deferOnce, watch } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import { internalClearCountMembers } from '../../helpers/visible';

/**
 * A clear batch's read of its markers (which marks each wake-up for the batch and opens its
 * pending count) sent again, its reply lost with the connection: ioredis resends it. Meanwhile a
 * run of the marked wake-up (its own timer, an operator's Promote) ended its deferral and counted
 * itself for the batch. The resend must keep that count (`SET ... NX`, now an `SADD`), not open
 * it afresh.
 *
 * What a user sees: the clear never counts the deferral twice, the run is the stage's one call,
 * and its next deferral is the first of a fresh chain. The count itself is what is promised now
 * (docs/contract.md, "The clear's exact count under a lost reply": it may under-count, never
 * count twice): the resend finds the run's new wake-up on the marker, promotes nothing, and the
 * clear answers 0 today. So whether the resend kept the run's count shows to no user: that is
 * read through the named internal helper, as the resend lands.
 */
const a: StageRef = { scope: ['r43-resent', 'ch-1'], stage: 'image' };

it('C10: a clear whose marker read is sent again after a run of the marked wake-up counted itself: counted at most once, a fresh chain, and the run kept in the pending count', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  const wakeUp = await deferOnce(h, a, 2);
  const worker = h.engine.createWorker();
  const { done } = watch(worker);
  type Send = (...args: unknown[]) => Promise<unknown>;
  const c = (await redisClient(h.engine.queue)) as unknown as Record<string, Send>;
  const real = c[CMD.sdClearMark]!;
  let keptAfterResend: string[] | undefined;
  c[CMD.sdClearMark] = async (...args: unknown[]) => {
    await real.apply(c, args);
    // its reply lost; meanwhile the marked wake-up runs (an operator's Promote) and defers again
    await (await h.engine.queue.getJob(wakeUp))!.promote();
    await waitFor(() => done.some((j) => j.id === wakeUp), 'the marked wake-up to run and defer again');
    const answer = await real.apply(c, args);
    keptAfterResend = await internalClearCountMembers(h);
    return answer;
  };
  let cleared: number;
  try {
    cleared = await h.engine.clearDeferrals(a.scope);
  } finally {
    c[CMD.sdClearMark] = real;
    await worker.close();
  }
  // the resend kept the count the run added to (internal: no user sees it, see above)
  expect(keptAfterResend).toEqual(['', wakeUp]);
  // never counted twice; 0 today (the resend promoted nothing: see above)
  expect(cleared).toBeLessThanOrEqual(1);
  expect(h.executor.callsFor(a)).toBe(2);
  expect(await listedDeferral(h.engine, a)).toMatchObject({ deferrals: 1 });
});
