import { ReplyError } from 'ioredis';
import type { StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';
import { CMD } from '../../../src/store/client';
import { harness, notSent } from '../../helpers/engine';

/**
 * Commit 05ae011 sends a batch's CLEAR without awaiting it and reads and promotes the
 * next batch meanwhile. When that CLEAR is refused (READONLY in a failover: nothing ran), the
 * clear throws its error, but only after it promoted the NEXT batch's wake-ups too: those stages
 * are now promoted but never recorded (marker and plain licence kept: no fresh chain, counted by
 * no call, and the error says nothing of them). Before, a refused CLEAR left the batches after
 * it deferred (their wake-ups delayed, clearable again), as the design's "promotion first, then
 * record" trade-off allows only for the batch whose record failed.
 */
type Multi = Record<string, (...a: unknown[]) => unknown> & { exec(): Promise<unknown> };

it("C10: a batch's CLEAR refused: the clear rejects before touching the next batch (501 stages: batch 2's one wake-up stays delayed and its stage deferred)", async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  const refs: StageRef[] = Array.from({ length: 501 }, (_, i) => ({
    scope: ['r38-fail', `c${String(i).padStart(3, '0')}`],
    stage: 'image',
  }));
  h.executor.fallback = notSent('no_worker_available');
  for (const r of refs) await h.engine.dispatchStage(r, {});
  expect(await h.engine.queue.getDelayedCount()).toBe(501);

  // the first CLEAR is refused as a replica refuses a write (nothing of it runs)
  const c = (await redisClient(h.engine.queue)) as unknown as { multi(): Multi };
  const realMulti = c.multi.bind(c);
  let refused = 0;
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
      if (isClear && refused++ === 0) throw new ReplyError("READONLY You can't write against a read only replica.");
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
  expect(String(error)).toMatch(/READONLY/);
  const last = (await h.engine.listDeferred(['r38-fail', 'c500']))[0];
  const lastWakeUp = last?.wakeUpJobId;
  // batch 1 (500): promoted, its record refused (the documented trade-off); batch 2: untouched
  expect({
    lastDeferred: await h.engine.isStageDeferred(refs[500]!),
    lastWakeUpState: lastWakeUp ? await h.engine.queue.getJobState(lastWakeUp) : 'none',
    counts: await h.engine.queue.getJobCounts('delayed', 'waiting'),
  }).toEqual({ lastDeferred: true, lastWakeUpState: 'delayed', counts: { delayed: 1, waiting: 500 } });
}, 60_000);
