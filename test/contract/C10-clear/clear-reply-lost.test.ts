import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { replyDropProxy } from '../../helpers/proxy';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * A connection drop mid-clear: the batch's script call (a MULTI) ran on Redis, and the
 * connection closed before its reply reached the engine. ioredis resends a pipeline left
 * unanswered by a reconnect (`autoResendUnfulfilledCommands`, on by default); the resend finds
 * the deferrals ended already and ends none. The clear may under-count then, never counts one
 * twice, and loses nothing: the stages are no longer deferred and their wake-ups, not promoted,
 * run at their time, each once, on a fresh chain.
 */
const refs: StageRef[] = [0, 1, 2].map((i) => ({ scope: ['r38-lost', `ch-${i}`], stage: 'image' }));

it('C10: a clear whose reply is lost with its connection (ioredis resends it) ends the 3 deferrals, counts at most 3, and their wake-ups run at their time on a fresh chain', async () => {
  const p = await replyDropProxy();
  try {
    const h = harness({
      connection: { host: '127.0.0.1', port: p.port, password: redisOptions().password },
      windows: { capacitySeconds: 3, jitter: 0 },
    });
    h.executor.fallback = notSent('no_worker_available');
    for (const r of refs) expect(await h.engine.dispatchStage(r, {})).toMatchObject({ reason: 'no_worker_available' });
    const wakeUps = (await h.engine.listDeferred(['r38-lost'])).map((d) => d.wakeUpJobId);
    expect(wakeUps).toHaveLength(3);

    // the next EXEC on the connection is the clear's batch call: its reply is lost
    p.dropAfterExec();
    const cleared = await h.engine.clearDeferrals(['r38-lost']);
    expect(p.drops()).toBe(1);
    expect(cleared).toBeLessThanOrEqual(3);
    // the three deferrals ended, their wake-ups still there
    expect(await h.engine.listDeferred(['r38-lost'])).toEqual([]);
    for (const id of wakeUps) expect(await h.engine.queue.getJob(id)).toBeDefined();
    // each wake-up runs once, and its deferral again is the first of a fresh chain
    const worker = h.engine.createWorker();
    const again = await waitFor(
      async () => {
        const listed = await h.engine.listDeferred(['r38-lost']);
        return listed.length === 3 ? listed : undefined;
      },
      'the wake-ups to run at their time and defer again',
      15_000,
    );
    expect(again.map((d) => d.deferrals)).toEqual([1, 1, 1]);
    for (const r of refs) expect(h.executor.callsFor(r)).toBe(2);
    await worker.close();
  } finally {
    await p.close();
  }
}, 30_000);
