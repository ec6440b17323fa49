import { retriedAfterCancel } from '../../helpers/observe';
import { harness, notSent, SENT } from '../../helpers/engine';
import { sleep, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A job a BullMQ user adds himself (`queue.add(name, data)`, a job scheduler's template, a flow
 * child: docs/producers.md "a job added by hand ... the engine dispatches it with any options")
 * usually has no `attempts`: BullMQ then tries it once. The processor reads its budget as
 * `job.opts.attempts ?? retry.attempts` (3), so after a real failure it throws a plain error
 * ("retry") and its release holds the stage's licence for a retry BullMQ will never make.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C11: a job added by hand without `attempts`', () => {
  it('a job whose failure is its last takes no licence: the live wake-up stays and dispatches the stage', async () => {
    const h = harness({ windows: { capacitySeconds: 0.3, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), new Error('downstream 500'));
    h.executor.fallback = SENT;
    await h.engine.dispatchStage(image, {}); // deferred: a licensed wake-up, due in 0.3 s
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the window ended', 3000);
    // the window is over, the wake-up waits for a worker; the user's own job for the stage (lifo: runs first)
    const own = await h.engine.queue.add('image', data, { lifo: true });
    const worker = h.engine.createWorker({ concurrency: 1 });
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length >= 1, 'the user job failed', 5000);
    // a stage neither dispatched nor cancelled must keep a way back (docs/design.md "Why no stage is lost")
    await waitFor(
      () => done.some((d) => d.result.dispatched),
      'the stage dispatched by its wake-up or a retry',
      3000,
    ).catch(() => undefined);
    const counts = await h.engine.queue.getJobCounts('wait', 'delayed', 'active', 'prioritized');
    expect({
      failedJob: failed[0]!.id === own.id,
      dispatched: h.executor.calls.filter((c) => c.result?.dispatched).length,
      jobsLeft: counts,
    }).toEqual({ failedJob: true, dispatched: 1, jobsLeft: { wait: 0, delayed: 0, active: 0, prioritized: 0 } });
  });

  it('without attempts (BullMQ stores 0) its first real failure is final and recorded `@j.<id>?`', async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 500'));
    const own = await h.engine.queue.add('image', data); // no attempts: BullMQ tries it once
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length >= 1, 'failed', 5000);
    await sleep(50);
    // failed for good, and on record as such: a cancel reaches it (retried by hand, it sends nothing)
    expect(await h.engine.queue.getJobState(own.id!)).toBe('failed');
    await worker.close();
    const retried = await retriedAfterCancel(h, image, own.id!);
    expect({ calls: retried.calls, failedAgain: retried.state === 'failed' }).toEqual({ calls: 0, failedAgain: false });
  });

  it('the same with a producer job `<sid>@r.…` (contract options, attempts 1) added without the probe after the window ended', async () => {
    const h = harness({
      windows: { capacitySeconds: 0.3, jitter: 0 },
      retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } },
    });
    h.executor.script(image, notSent('no_worker_available'), new Error('downstream 500'));
    h.executor.fallback = SENT;
    await h.engine.dispatchStage(image, {});
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the window ended', 3000);
    const sid = 'book-1/ch-2/sc-7/image';
    const r = await h.engine.queue.add('image', data, {
      jobId: `${sid}@r.${Date.now().toString(36)}abcd`,
      deduplication: { id: sid },
      attempts: 1,
      backoff: { type: 'fixed', delay: 10 },
      removeOnComplete: true,
      lifo: true,
    });
    const worker = h.engine.createWorker({ concurrency: 1 });
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length >= 1, 'the producer job failed', 5000);
    await waitFor(() => done.some((d) => d.result.dispatched), 'the stage dispatched', 3000).catch(() => undefined);
    expect({
      failed: failed[0]!.id === r.id,
      dispatched: h.executor.calls.filter((c) => c.result?.dispatched).length,
    }).toEqual({
      failed: true,
      dispatched: 1,
    });
  });
});
