import type { StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';
import { CMD } from '../../../src/store/client';
import { harness } from '../../helpers/engine';
import { deferOnce } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';
import { stubWait } from '../../helpers/replica-wait';

/**
 * A MULTI whose command failed inside EXEC (a script error reply: nothing written) sends no WAIT,
 * and the command's error is the answer, not `ReplicationUnconfirmedError`.
 */
const a: StageRef = { scope: ['r50-refused', 'ch-1'], stage: 'image' };

type Multi = Record<string, (...args: unknown[]) => unknown> & { exec(): Promise<unknown> };

async function refuseClearRecord(queue: unknown) {
  const c = (await redisClient(queue as never)) as unknown as { multi(): Multi };
  const realMulti = c.multi.bind(c);
  c.multi = () => {
    const m = realMulti();
    // the batch's script answers an error reply inside EXEC (it ran nothing); the rest of the MULTI runs
    m[CMD.sdClear] = () => m.eval!("return redis.error_reply('ERR r50 record refused')", 0);
    return m;
  };
  return () => {
    c.multi = realMulti;
  };
}

async function outcome(waitFails: boolean) {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 }, waitForReplicas: { replicas: 1, timeoutMs: 10 } });
  const w = await stubWait(h.engine.queue);
  await deferOnce(h, a);
  const restore = await refuseClearRecord(h.engine.queue);
  try {
    if (waitFails) w.fail(1);
    const out = await h.engine.clearDeferrals(['r50-refused']).then(
      (n) => ({ resolved: n }),
      (e: Error & { code?: string }) => ({ rejected: e.code ?? e.message }),
    );
    // the call wrote nothing: the stage is still deferred, its chain not ended (a clear again ends it)
    const listed = await listedDeferral(h.engine, a);
    return {
      out,
      stillDeferred: (await h.engine.isStageDeferred(a)) && listed?.deferrals === 1,
      failedWaits: w.failed(),
    };
  } finally {
    restore();
    w.restore();
  }
}

it('C10: control: a clear batch call refused inside EXEC (WAIT fine) rejects with the record error', async () => {
  const r = await outcome(false);
  expect(r.stillDeferred).toBe(true); // the call wrote nothing
  expect(r.out).toEqual({ rejected: 'ERR r50 record refused' });
});

it('C10: a clear batch call refused inside EXEC, its WAIT set to fail, answers its own error, not REPLICATION_UNCONFIRMED (nothing was written)', async () => {
  const r = await outcome(true);
  // no WAIT is sent for it (8e4123c sent one, which failed: REPLICATION_UNCONFIRMED, "The clear
  // was written")
  expect(r.failedWaits).toBe(0);
  expect(r.stillDeferred).toBe(true); // the record did not run
  expect(r.out).toEqual({ rejected: 'ERR r50 record refused' });
});
