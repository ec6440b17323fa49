import { harness } from '../../helpers/engine';
import { fast, fetchBy } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * Commit b5526de (BATCH's begin, src/lua/scripts.ts ~l.295): "a run of a job recorded
 * `<member>?` whose stalled count grew since [FAIL's `sdt`] is a redelivery, not a retry by hand".
 * The stalled count also grows AFTER a real retry by hand: the retried run's worker freezes (GC
 * pause) or dies right after fetching it, before its begin, and BullMQ's stalled check hands it
 * on (BullMQ's `reprocessJob` keeps `stc`).
 * The `atm` rule does not catch such a retry either: the engine's 'failed' listener
 * (`recordFailures`, src/engine.ts) runs FAIL again once BullMQ failed the job, so `sdf` holds
 * the `atm` AFTER BullMQ's count, which a plain `job.retry()` (Bull Board's "Retry") keeps: `sdf ==
 * atm`. The `?` record was the only sign of the retry, and the stalled count now overrules it.
 * The retry by hand is taken for a redelivery of the old run: no fresh chain or budget (3 of 3
 * failures spent), so its first failure fails it for good again and the stage is never sent
 * (docs/design.md: a retry by hand starts "a fresh chain and budget").
 * Without the frozen fetch the same test passes (the retry runs twice, the second sends).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C16: a retry by hand whose first run is redelivered by the stalled check', () => {
  it('a job retried by hand gets a fresh retry budget (its stage is sent) also when the retried run stalls before its begin (was taken for a crash redelivery)', async () => {
    const h = harness();
    // three failures end the first chain; after the retry by hand: one transient failure, then sent
    h.executor.script(image, new Error('500 a'), new Error('500 b'), new Error('500 c'), new Error('500 d'));
    const job = await h.engine.queue.add('image', data, { attempts: 3, backoff: fast });
    const first = h.engine.createWorker({ stalledInterval: 300 });
    await waitFor(
      async () => (await h.engine.queue.getJobState(job.id!)) === 'failed',
      'the job failed for good',
      10_000,
    );
    await first.close();
    expect(h.executor.calls.length).toBe(3);

    // the operator retries it (Bull Board's "Retry")
    await (await h.engine.queue.getJob(job.id!))!.retry('failed');
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
