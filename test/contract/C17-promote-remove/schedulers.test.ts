import { harness, notSent, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { retriedAfterCancel } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A BullMQ user ticks a stage with a job scheduler (`queue.upsertJobScheduler`) instead of a
 * host loop calling `enqueue`: every N ms a job `repeat:<scheduler id>:<millis>` (an id with `:`,
 * no `@`: a job "added by hand") carries the stage.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C17: a job scheduler producing dispatch jobs for one stage', () => {
  it('a deferral suppresses the scheduler ticks; no call inside the window; the wake-up dispatches', async () => {
    const h = harness({ windows: { capacitySeconds: 1.5, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    h.executor.fallback = SENT;
    const suppressed: unknown[] = [];
    h.engine.on('suppressed', (e) => suppressed.push(e));
    const deferred: { until: number }[] = [];
    h.engine.on('deferred', (e) => deferred.push(e));
    const worker = h.engine.createWorker({ concurrency: 4 });
    const errors: Error[] = [];
    worker.on('error', (e) => errors.push(e));
    const { failed } = watch(worker);
    await h.engine.queue.upsertJobScheduler('tick-image', { every: 200 }, { name: 'image', data });
    await waitFor(() => h.executor.calls.length >= 2, 'the wake-up dispatched', 6000);
    await h.engine.queue.removeJobScheduler('tick-image');
    const until = deferred[0]!.until;
    const inside = h.executor.calls.filter((c) => c.at > h.executor.calls[0]!.at && c.at < until - 50);
    expect({
      inside: inside.length,
      failed: failed.map((f) => f.error.message),
      errors: errors.map((e) => e.message),
    }).toEqual({
      inside: 0,
      failed: [],
      errors: [],
    });
    expect(suppressed.length).toBeGreaterThan(2);
  });

  it('a scheduler job (no attempts) that fails is failed for good and a cancel still reaches it; later ticks dispatch, each once', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 1500 } } });
    h.executor.script(image, new Error('down'));
    h.executor.fallback = SENT;
    const worker = h.engine.createWorker({ concurrency: 4 });
    const { done, failed } = watch(worker);
    await h.engine.queue.upsertJobScheduler('tick-image', { every: 300 }, { name: 'image', data });
    await waitFor(() => failed.length >= 1, 'the first tick failed', 5000);
    const heldId = failed[0]!.id;
    expect(heldId).toMatch(/^repeat:tick-image:\d+$/);
    // the next tick dispatches; the failed job must not send again
    await waitFor(() => done.some((d) => d.result.dispatched), 'a tick dispatched', 5000);
    await h.engine.queue.removeJobScheduler('tick-image');
    await worker.close();
    const sent = h.executor.calls.filter((c) => c.result?.dispatched);
    expect(await h.engine.queue.getJobState(heldId)).toBe('failed');
    expect(sent.length).toBe(done.filter((d) => d.result.dispatched).length);
    // on record as failed for good: a cancel of the stage reaches it (retried by hand, it sends nothing)
    const retried = await retriedAfterCancel(h, image, heldId);
    expect({ calls: retried.calls, failedAgain: retried.state === 'failed' }).toEqual({ calls: 0, failedAgain: false });
  });
});
void fast;
