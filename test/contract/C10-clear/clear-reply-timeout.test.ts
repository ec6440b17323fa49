import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { deferredWithWorker, refuseButRun } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';
import { replyStallProxy } from '../../helpers/proxy';
import { redisOptions } from '../../helpers/redis';

/**
 * D245990 read a refused-only batch's kept answer back when its CLEAR's
 * reply was lost. But the read was a plain GET on the same connection, and its own failure was
 * taken as "no answer" (`[0]`). A reply that times out (ioredis' `commandTimeout`: the network or
 * Redis stalls past it right after Redis ran the EXEC) is the lost-reply case, and the GET sent
 * right behind it on the same connection timed out the same way: the CLEAR ran (took the count,
 * deleted it, kept `1,<id>`) and the clear reported the stage whose run counted itself as not
 * cleared. With a wake-up promoted, the clear rejected with the timeout though its kept answer
 * held the count. Fixed: whatever was promoted, a failed record is read back, and a read that
 * fails is tried again for 3 s (`keptAnswer` in src/store/clear.ts).
 */

/** An engine whose connection goes through `proxy`, its commands timing out after 500 ms. */
const stalled = (port: number) =>
  harness({
    connection: { host: '127.0.0.1', port, password: redisOptions().password, commandTimeout: 500 },
    windows: { capacitySeconds: 300, jitter: 0 },
  });

const a: StageRef = { scope: ['r48-lost', 'ch-1'], stage: 'image' };

it('C10: a refused-only batch whose CLEAR ran but whose reply timed out (commandTimeout; the first reads of its kept answer time out too) reports the stage its run cleared as cleared', async () => {
  const p = await replyStallProxy(1_500);
  try {
    const h = stalled(p.port);
    const { wakeUp: wa, worker, done } = await deferredWithWorker(h, a);
    // the first promotion is refused but the wake-up runs anyway (it counts itself for the clear);
    // the retry is refused too, so the batch is refused-only, and its CLEAR's EXEC is the next one
    const refusal = refuseButRun(h.engine.queue, wa, done, async (call) => {
      if (call === 1) await worker.close();
      else p.stallAfterExec();
    });
    let outcome: number | { cleared: number; notCleared: number } | { error: string };
    try {
      outcome = await h.engine
        .clearDeferrals(['r48-lost'])
        .catch((e: { cleared?: number; notCleared?: number; message: string }) =>
          e.cleared !== undefined ? { cleared: e.cleared, notCleared: e.notCleared! } : { error: e.message },
        );
    } finally {
      refusal.restore();
    }
    expect(p.stalls()).toBe(1);
    // a's run ended its deferral (its next one is the first of a fresh chain)
    expect(await listedDeferral(h.engine, a)).toMatchObject({ deferrals: 1 });
    // a's run ended its deferral for this clear: 1 cleared, not "0 cleared, 1 not cleared" (a's
    // stage is no longer the deferral the clear reports it left)
    expect(outcome).toBe(1);
  } finally {
    await p.close();
  }
}, 60_000);

const b: StageRef = { scope: ['r48-lost-promoted', 'ch-1'], stage: 'image' };

it("C10: a batch with a promoted wake-up whose CLEAR ran but whose reply timed out still answers its count (it rejected with ioredis' untyped timeout)", async () => {
  const p = await replyStallProxy(1_500);
  try {
    const h = stalled(p.port);
    h.executor.script(b, notSent('no_worker_available'));
    expect(await h.engine.dispatchStage(b, {})).toMatchObject({ reason: 'no_worker_available' });
    type Backend = { promote(id: string): Promise<void> };
    const backend = (h.engine.queue as unknown as { getBackend(): Backend }).getBackend();
    const real = backend.promote.bind(backend);
    backend.promote = async (id: string) => {
      await real(id);
      p.stallAfterExec();
    };
    let outcome: unknown;
    try {
      outcome = await h.engine.clearDeferrals(['r48-lost-promoted']).catch((e: Error) => e);
    } finally {
      backend.promote = real;
    }
    expect(p.stalls()).toBe(1);
    expect(await h.engine.isStageDeferred(b)).toBe(false);
    // the clear ended b's deferral and knows it (its kept answer)
    expect(outcome instanceof Error ? { name: outcome.name, message: outcome.message } : outcome).toBe(1);
  } finally {
    await p.close();
  }
}, 60_000);
