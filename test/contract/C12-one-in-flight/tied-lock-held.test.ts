import type { ExecutorResult } from '../../../src';
import { dispatchJobData } from '../../../src/job-data';
import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';
import { bullLock, fetchBy, held } from '../../helpers/held';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A job's stage lock (`<job id>\n<fence>\n<BullMQ token>`, live while it exists) on the
 * paths test/contract/C12-one-in-flight/job-lock.test.ts does not walk.
 */
const ref = { scope: ['book-1', 'ch-2'], stage: 'image' };
const data = dispatchJobData(ref, {}, undefined);

/** An executor whose first call blocks until released; counts the calls running at once. */
function gated() {
  const first = held<ExecutorResult<string>>(SENT);
  const state = { calls: 0, active: 0, peak: 0 };
  const executor = async (): Promise<ExecutorResult<string>> => {
    state.calls++;
    state.active++;
    state.peak = Math.max(state.peak, state.active);
    try {
      return state.calls === 1 ? await first.answer() : SENT;
    } finally {
      state.active--;
    }
  };
  return { first, state, executor };
}

(onCluster ? describe.skip : describe)('C12: a job attempt’s stage lock', () => {
  it.each([
    ['a newline inside', 'hand\n1'],
    ['a leading newline', '\nhand-1'],
  ])(
    'a job added by hand whose id has %s never reaches the stage lock: refused (INVALID_JOB_OPTIONS), its executor never called',
    async (_what, jobId) => {
      const g = gated();
      const h = harness({ executor: g.executor });
      const worker = h.engine.createWorker();
      worker.on('error', () => undefined);
      const { failed } = watch(worker);
      try {
        await h.engine.queue.add(ref.stage, data, { jobId, attempts: 1 });
        await waitFor(() => failed.length > 0, 'the job to fail');
        expect(failed[0]!.error).toMatchObject({ code: 'INVALID_JOB_OPTIONS' });
        expect(g.state.calls).toBe(0);
        expect(g.state.peak).toBeLessThanOrEqual(1);
      } finally {
        g.first.release();
      }
    },
  );

  it('a cancel during the attempt of a producer job, then the worker loses the job (a stall): its redelivery does not dispatch the cancelled stage', async () => {
    const g = gated();
    const h = harness({ executor: g.executor });
    const { id } = await addProducerJob(h.engine.queue, ref);
    // a worker takes the job and then stops renewing BullMQ's lock of it (frozen, or its renewals fail)
    await fetchBy(h, 'bull-1', 1000);
    const job = (await h.engine.queue.getJob(id!))!;
    const frozen = Promise.resolve(h.engine.processor(job, 'bull-1')).catch((e: unknown) => e);
    await g.first.running;
    expect(await h.engine.cancelActiveDispatch(ref)).toMatchObject({ inFlight: true });
    // BullMQ's lock of the job lapses; the stalled check of a running worker redelivers it
    await waitFor(async () => (await h.redis.exists(bullLock(h, id!))) === 0, 'BullMQ’s lock to lapse');
    const { done, failed } = watch(h.engine.createWorker({ stalledInterval: 200 }));
    try {
      await waitFor(() => done.length + failed.length > 0, 'the redelivered job to end');
      expect(done[0]).toMatchObject({ id, result: { dispatched: false, cancelled: true } });
      expect(g.state.calls).toBe(1);
    } finally {
      g.first.release();
      await frozen;
    }
  });
});
