import { ReplyError } from 'ioredis';
import { ClearIncompleteError, type StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';
import { CMD } from '../../../src/store/client';
import { harness, notSent } from '../../helpers/engine';

/**
 * A clear runs in batches of 500, each one script call then its promotions. A batch's call
 * refused (READONLY in a failover: nothing of it ran) stops the clear there: the first batch's
 * refusal is the call's own error; a later one rejects with `ClearIncompleteError`, saying how
 * many the batches before it cleared. The refused batch and those after it stay deferred.
 */
type Multi = Record<string, (...a: unknown[]) => unknown> & { exec(): Promise<unknown> };

it.each([
  ['the first batch refused: its own error, nothing cleared', 1],
  ['the second batch refused: CLEAR_INCOMPLETE with the 500 the first cleared', 2],
])(
  'C10: a batch refused stops the clear (501 stages); %s',
  async (_what, refusedBatch) => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    const refs: StageRef[] = Array.from({ length: 501 }, (_, i) => ({
      scope: ['r38-fail', `c${String(i).padStart(3, '0')}`],
      stage: 'image',
    }));
    h.executor.fallback = notSent('no_worker_available');
    for (const r of refs) await h.engine.dispatchStage(r, {});
    expect(await h.engine.queue.getDelayedCount()).toBe(501);

    // the n-th batch's call is refused as a replica refuses a write (nothing of it runs)
    const c = (await redisClient(h.engine.queue)) as unknown as { multi(): Multi };
    const realMulti = c.multi.bind(c);
    let batches = 0;
    c.multi = () => {
      const m = realMulti();
      const clear = m[CMD.sdClear]!.bind(m);
      let isClear = false;
      m[CMD.sdClear] = (...a: unknown[]) => {
        isClear = true;
        return clear(...a);
      };
      const exec = m.exec.bind(m);
      m.exec = async () => {
        if (isClear && ++batches === refusedBatch)
          throw new ReplyError("READONLY You can't write against a read only replica.");
        return exec();
      };
      return m;
    };
    let error: unknown;
    try {
      await h.engine.clearDeferrals(['r38-fail']);
    } catch (e) {
      error = e;
    } finally {
      c.multi = realMulti;
    }
    if (refusedBatch === 1) {
      expect(error).not.toBeInstanceOf(ClearIncompleteError);
      expect(String(error)).toMatch(/READONLY/);
    } else {
      expect(error).toBeInstanceOf(ClearIncompleteError);
      expect(error).toMatchObject({ code: 'CLEAR_INCOMPLETE', cleared: 500 });
      expect(String((error as ClearIncompleteError).cause)).toMatch(/READONLY/);
    }
    const cleared = refusedBatch === 1 ? 0 : 500;
    expect({
      deferred: (await h.engine.listDeferred(['r38-fail'])).length,
      lastDeferred: await h.engine.isStageDeferred(refs[500]!),
      counts: await h.engine.queue.getJobCounts('delayed', 'waiting'),
    }).toEqual({ deferred: 501 - cleared, lastDeferred: true, counts: { delayed: 501 - cleared, waiting: cleared } });
  },
  60_000,
);
