import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * Src/bullmq/processor.ts (`backoffMs`'s comment, b5526de): "A job's custom backoff
 * type without a Worker's `backoffStrategy` waits by the engine's own `retry.backoff`." Only on
 * the engine's own path: while BullMQ's count allows a retry, the 'failed' case hands the error to
 * BullMQ (`custom === undefined && job.attemptsMade + 1 < ctx.attempts`), and BullMQ's
 * `shouldRetryJob` then throws "Unknown backoff strategy" (its `lookupStrategy`): the job is left
 * active, its lock no longer renewed, until the stalled check hands it on — one lockDuration per
 * failure, each failure a stall (`stc`), so maxStalledCount soon fails the job for good.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C11: a job of a custom backoff type on a Worker without backoffStrategy', () => {
  it('a transient failure of a job with a custom backoff type (no Worker strategy) is retried by the engine after its retry.backoff (was left stuck active until the stalled check)', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 50 } } });
    h.executor.script(image, new Error('500 once'));
    const job = await h.engine.queue.add('image', data, { attempts: 3, backoff: { type: 'mine' } as never });
    const worker = h.engine.createWorker({ lockDuration: 5000, stalledInterval: 5000 });
    const errors: string[] = [];
    worker.on('error', (e) => errors.push(e.message.split('\n')[0]!));
    const { done } = watch(worker);
    await waitFor(() => done.length > 0 || errors.length > 0, 'the retry or an error', 4000).catch(() => undefined);
    await waitFor(() => done.length > 0, 'the retried job sent the stage', 2000).catch(() => undefined);
    expect({
      errors,
      state: await h.engine.queue.getJobState(job.id!),
      sent: h.executor.calls.filter((c) => c.result?.dispatched).length,
    }).toEqual({ errors: [], state: 'completed', sent: 1 });
  }, 20_000);
});
