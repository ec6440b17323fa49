import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import { keptFor } from '../../helpers/visible';
import type { StageRef } from '../../../src';

const a: StageRef = { scope: ['trim', 'worker'], stage: 'a' };

/**
 * C27: "failed jobs removed leave no record behind". BullMQ's Worker takes `removeOnFail` too
 * (`createWorker({ removeOnFail: { count: 0 } })`, a common setting), applied to every job that has none
 * of its own, as the engine's jobs have none.
 */
describe("C27: a job removed by the Worker's own removeOnFail", () => {
  it('C27: leaves nothing of its stage behind once it failed for good', async () => {
    const h = harness({ retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.fallback = { dispatched: false, jobs: 0, reason: 'send_failed' };
    const worker = h.engine.createWorker({ removeOnFail: { count: 0 } });
    const { failed } = watch(worker);
    const { jobId } = await h.engine.enqueue(a, {});
    await waitFor(() => failed.length === 1 || null, 'failed for good');
    await waitFor(async () => (await h.engine.queue.getJob(jobId!)) === undefined, 'BullMQ removed the failed job');
    expect(await keptFor(h, a)).toEqual([]);
  });
});
