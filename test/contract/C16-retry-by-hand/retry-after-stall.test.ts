import { harness } from '../../helpers/engine';
import { fast, fetchBy } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A job failed for good is retried by hand with resetAttemptsMade; the retried run's worker
 * freezes (GC pause) or dies right after fetching it, before its begin, and BullMQ's stalled
 * check hands it on. The run it hands on is still the retry: a fresh chain and BullMQ's fresh
 * budget, so one transient failure is not final and the stage is sent.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C16: a retry by hand whose first run is redelivered by the stalled check', () => {
  it('a job retried by hand with resetAttemptsMade gets a fresh retry budget (its stage is sent) also when the retried run stalls before its begin', async () => {
    const h = harness();
    // three failures end the first chain; after the retry by hand: one transient failure, then sent
    h.executor.script(image, new Error('500 a'), new Error('500 b'), new Error('500 c'), new Error('500 d'));
    const job = await addProducerJob(h.engine.queue, image, { attempts: 3, backoff: fast });
    const first = h.engine.createWorker({ stalledInterval: 300 });
    await waitFor(
      async () => (await h.engine.queue.getJobState(job.id!)) === 'failed',
      'the job failed for good',
      10_000,
    );
    await first.close();
    expect(h.executor.calls.length).toBe(3);

    // the operator retries it afresh
    await (await h.engine.queue.getJob(job.id!))!.retry('failed', { resetAttemptsMade: true });
    // a worker fetches the retried job and freezes (or dies) before its begin: its lock lapses
    const frozen = await fetchBy(h, 'frozen-worker', 200);
    expect(frozen.id).toBe(job.id);

    // a healthy worker's stalled check hands the job on; it runs the retried job
    h.engine.createWorker({ stalledInterval: 300 });
    await waitFor(
      async () => ['completed', 'failed'].includes(await h.engine.queue.getJobState(job.id!)),
      'the retried job finished',
      15_000,
    );
    expect({
      state: await h.engine.queue.getJobState(job.id!),
      sent: h.executor.calls.filter((c) => c.result?.dispatched).length,
      callsAfterRetry: h.executor.calls.length - 3,
    }).toEqual({ state: 'completed', sent: 1, callsAfterRetry: 2 });
  }, 30_000);
});
