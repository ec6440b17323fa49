import { harness, notSent, SENT } from '../../helpers/engine';
import { fast } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { EngineEvents, StageRef } from '../../../src';

/**
 * Commit 2e03d06 made `woken` "once per wake" (src/events.ts: "A stage woke, once per
 * wake"; docs/observability.md, `stage_deferral.wakeups`: "stages woken, once per wake"). It
 * keeps an early wake from being reported twice with a job-hash mark (`sdw`), but the plain
 * report still sits in the attempt (src/dispatch.ts `locked`: every begin of a wake-up that took
 * the lock emits `woken`). A wake-up whose window ended (or that an operator promoted) and whose
 * executor then throws is retried by BullMQ (its `attempts`/`backoff`, README semantics table):
 * the retry's begin takes the lock again and reports `woken` again. One wake, one promoted
 * wake-up job, one dispatch of the stage: `stage_deferral.wakeups` counts two (three with two
 * failures). The same wake-up woken early by `wakeDeferred` and failing the same way is counted
 * once (its `sdw` mark silences every run): the count of a wake depends on whether it was early.
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
