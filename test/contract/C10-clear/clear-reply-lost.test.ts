import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { clearLosingRecordReply, replyDropProxy } from '../../helpers/proxy';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * A connection drop mid-clear: the batch's CLEAR (a MULTI) ran on Redis, and the
 * connection closed before its reply reached the engine. ioredis resends a pipeline left
 * unanswered by a reconnect (`autoResendUnfulfilledCommands`, on by default), so CLEAR runs a
 * second time; that run finds the markers gone and the licences already marked `!` and answers
 * nothing, and clearDeferrals reports 0 for deferrals it ended. (DEFER recognises its own resend,
 * "a client resent it after a failover": CLEAR does not.)
 */
const refs: StageRef[] = [0, 1, 2].map((i) => ({ scope: ['r38-lost', `ch-${i}`], stage: 'image' }));

it('C10: a clear whose CLEAR reply is lost with its connection (ioredis resends it) still answers the 3 deferrals it ended', async () => {
  const p = await replyDropProxy();
  try {
    const h = harness({
      connection: { host: '127.0.0.1', port: p.port, password: redisOptions().password },
      windows: { capacitySeconds: 300, jitter: 0 },
    });
    h.executor.fallback = notSent('no_worker_available');
    for (const r of refs) expect(await h.engine.dispatchStage(r, {})).toMatchObject({ reason: 'no_worker_available' });
    expect(await h.engine.queue.getDelayedCount()).toBe(3);

    // once the clear's promotions are done, the next EXEC on the connection is the batch's CLEAR
    const outcome = await clearLosingRecordReply(h.engine, p, ['r38-lost'], refs.length);
    expect(p.drops()).toBe(1);
    // the three deferrals ended by this clear: none listed, their wake-ups waiting to run
    await waitFor(async () => (await h.engine.listDeferred(['r38-lost'])).length === 0, 'the deferrals to be gone');
    expect(await h.engine.queue.getWaitingCount()).toBe(3);
    // the answer: 3 cleared (or an error saying the outcome is unknown), not 0
    expect(outcome).toEqual({ cleared: 3 });
    // each with a fresh chain: its wake-up runs once, and its deferral again is the chain's first
    const worker = h.engine.createWorker();
    const again = await waitFor(async () => {
      const listed = await h.engine.listDeferred(['r38-lost']);
      return listed.length === 3 ? listed : undefined;
    }, 'the woken stages to run and defer again');
    expect(again.map((d) => d.deferrals)).toEqual([1, 1, 1]);
    for (const r of refs) expect(h.executor.callsFor(r)).toBe(2);
    await worker.close();
  } finally {
    await p.close();
  }
});
