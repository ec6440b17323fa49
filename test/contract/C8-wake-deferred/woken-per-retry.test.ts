import { harness, notSent, SENT } from '../../helpers/engine';
import { fast } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { EngineEvents, StageRef } from '../../../src';

/**
 * A wake-up whose window ended (or that an operator promoted) and whose executor then throws is
 * retried by BullMQ (its `attempts`/`backoff`): its first run reported the wake, and the retry,
 * which takes the lock again, does not report it again.
 */
const a: StageRef = { scope: ['r34-retry', 'ch-1'], stage: 'image' };

describe('C8: a woken wake-up retried by BullMQ', () => {
  it('a wake-up promoted by hand whose first run throws (BullMQ retries it) reports woken once, not once per run', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 }, retry: { attempts: 3, backoff: fast } });
    h.executor.script(a, notSent('no_worker_available'), new Error('downstream 500'), SENT);
    const woken: EngineEvents['woken'][] = [];
    h.engine.on('woken', (e) => woken.push(e));
    const dispatched: unknown[] = [];
    h.engine.on('dispatched', (e) => dispatched.push(e.ref));
    await h.engine.dispatchStage(a, {});
    const [d] = await h.engine.listDeferred();
    // Bull Board's Promote: the stage wakes now
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.promote();
    const worker = h.engine.createWorker();
    try {
      await waitFor(() => dispatched.length === 1, 'the wake-up, retried once, to dispatch');
    } finally {
      await worker.close();
    }
    expect(h.executor.callsFor(a)).toBe(3); // capacity, the failure, the dispatch
    expect(woken).toEqual([{ ref: a, jobId: d!.wakeUpJobId }]);
  });
});
