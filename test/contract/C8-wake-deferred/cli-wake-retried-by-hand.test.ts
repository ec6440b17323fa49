import type { StageRef } from '../../../src';
import { type harness, notSent, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { cliInProcess, instrumentedHarness, wakeupsOf } from '../../helpers/metrics';
import { waitFor } from '../../helpers/redis';

/**
 * Commit 0c76269: "the attempt whose begin takes the stage from a CLI-woken wake-up
 * reports the wake". BATCH's begin computes that (`took`) only in its `elseif lic` branch: an
 * attempt of a job retried by hand (`retried`: Bull Board's Retry on a job failed for good)
 * takes the lock with the wake-up still holding the licence, sends (or defers) the stage, and its
 * release (or DEFER) revokes the wake-up, which the engine then removes: nobody reports the wake.
 */
const a: StageRef = { scope: ['r37-retried', 'ch-1'], stage: 'image' };

const setup = () =>
  instrumentedHarness({ retry: { attempts: 1, backoff: fast }, windows: { capacitySeconds: 300, jitter: 0 } });

/**
 * A job of `a` fails for good; a direct dispatch defers `a` (capacity); an operator retries the
 * failed job in Bull Board (it waits: no worker runs), then wakes `a` with the CLI (its wake-up
 * is promoted behind the retried job). Returns the ids.
 */
async function failedRetriedThenCliWake(h: ReturnType<typeof harness>) {
  const first = await h.engine.enqueue(a, {});
  expect(first.added).toBe(true);
  const w1 = h.engine.createWorker();
  const { failed } = watch(w1);
  await waitFor(() => failed.length === 1, 'the enqueued job to fail for good');
  await w1.close();
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
  const delayed = await h.engine.queue.getDelayed();
  expect(delayed).toHaveLength(1);
  const wakeUp = delayed[0]!.id!;
  await (await h.engine.queue.getJob(first.jobId!))!.retry('failed');
  const r = await cliInProcess(h, '--json', 'wake', '--stage', 'image');
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout)).toEqual({ woken: [a] });
  return { job: first.jobId!, wakeUp };
}

describe('C8: a CLI wake whose stage a job retried by hand takes first', () => {
  it('a job retried by hand that sends the stage of a CLI-woken wake-up counts the wake once (woken early, wakeups 1)', async () => {
    const { h, reader, woken, done } = setup();
    try {
      h.executor.script(a, new Error('down'), notSent('no_worker_available'), SENT);
      const { job, wakeUp } = await failedRetriedThenCliWake(h);
      const worker = h.engine.createWorker();
      const { done: completed } = watch(worker);
      await waitFor(() => completed.some((c) => c.id === job), 'the retried job to complete');
      await waitFor(
        async () => (await h.engine.queue.getJobs(['wait', 'delayed', 'active', 'prioritized'])).length === 0,
        'the queue to drain',
      );
      await worker.close();
      // the stage went out once, by the retried job
      expect(h.executor.callsOf(a).filter((c) => c.result?.dispatched)).toHaveLength(1);
      expect(completed.find((c) => c.id === job)!.result).toMatchObject({ dispatched: true });
      // one wake: one event, one count
      expect(woken).toEqual([{ ref: a, jobId: wakeUp, early: true }]);
      expect(await wakeupsOf(reader)).toEqual({ total: 1, early: 1 });
    } finally {
      await done();
    }
  });

  it('a job retried by hand that defers the stage of a CLI-woken wake-up again still counts the wake once', async () => {
    const { h, reader, woken, done } = setup();
    try {
      h.executor.script(a, new Error('down'), notSent('no_worker_available'), notSent('no_worker_available'));
      const { job, wakeUp } = await failedRetriedThenCliWake(h);
      const worker = h.engine.createWorker();
      const { done: completed } = watch(worker);
      await waitFor(() => completed.some((c) => c.id === job), 'the retried job to complete');
      await waitFor(
        async () => (await h.engine.queue.getJob(wakeUp)) === undefined,
        'the revoked wake-up to be removed',
      );
      await worker.close();
      expect(completed.find((c) => c.id === job)!.result).toMatchObject({
        dispatched: false,
        reason: 'no_worker_available',
      });
      expect(woken).toEqual([{ ref: a, jobId: wakeUp, early: true }]);
      expect(await wakeupsOf(reader)).toEqual({ total: 1, early: 1 });
    } finally {
      await done();
    }
  });
});
