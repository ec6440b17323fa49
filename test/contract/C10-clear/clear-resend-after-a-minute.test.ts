import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { clearLosingRecordReply, replyDropProxy } from '../../helpers/proxy';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * F4c2c55 keeps a clear batch's answer 60 s (`sd:clr:<uuid>`) for ioredis' resend of
 * the batch after a lost reply. ioredis resends whenever it reconnects, however long that takes:
 * with BullMQ's queue connection (retryStrategy 1 s ... 20 s, maxRetriesPerRequest 20) a command
 * stays queued about 4 minutes of outage, and forever with `maxRetriesPerRequest: null`. An outage
 * longer than the minute (Redis itself up) brings back a review: the resend finds the answer
 * gone and its own work done, and answers 0.
 */
const refs: StageRef[] = [0, 1, 2].map((i) => ({ scope: ['r40-late', `ch-${i}`], stage: 'image' }));
const OUTAGE_MS = 62_000;

it('C10: a clear whose CLEAR reply is lost and whose connection comes back after a minute (ioredis resends it) still answers the 3 deferrals it ended', async () => {
  const p = await replyDropProxy(OUTAGE_MS);
  try {
    const h = harness({
      // reconnect every 2 s (BullMQ's default backs off to 20 s, maxRetriesPerRequest 20: about 4 minutes
      // of failed reconnects before ioredis gives up on the queued MULTI; the resend comes later still)
      connection: { host: '127.0.0.1', port: p.port, password: redisOptions().password, retryStrategy: () => 2000 },
      windows: { capacitySeconds: 600, jitter: 0 },
    });
    h.executor.fallback = notSent('no_worker_available');
    for (const r of refs) expect(await h.engine.dispatchStage(r, {})).toMatchObject({ reason: 'no_worker_available' });

    const outcome = await clearLosingRecordReply(h.engine, p, ['r40-late'], refs.length);
    expect(p.drops()).toBe(1);
    await waitFor(async () => (await h.engine.listDeferred(['r40-late'])).length === 0, 'the deferrals to be gone');
    expect(await h.engine.queue.getWaitingCount()).toBe(3);
    // the answer: 3 cleared (or an error saying the outcome is unknown), not 0
    expect(outcome).toEqual({ cleared: 3 });
  } finally {
    await p.close();
  }
}, 150_000);
