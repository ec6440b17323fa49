import { harness, notSent } from '../../helpers/engine';
import { holdsOn } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

const ref = (book: string, ch: string, sc: string, stage = 'image') => ({ scope: [book, ch, sc], stage });

describe('C9: cancelActiveDispatch', () => {
  it('removes the delayed wake-up and clears the deferral', async () => {
    const h = harness();
    const a = ref('b', 'c', 's');
    h.executor.script(a, notSent('no_worker_available'));
    await h.engine.dispatchStage(a, {});
    expect(await h.engine.queue.getDelayedCount()).toBe(1);
    const r = await h.engine.cancelActiveDispatch(a, 'user cancelled');
    expect(r).toMatchObject({ hadDeferral: true, inFlight: false, removedJobs: 1, reason: 'user cancelled' });
    expect(await h.engine.queue.getDelayedCount()).toBe(0);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    // memory no user sees (the next dispatch revokes a hold left behind): none is kept
    expect(await holdsOn(h.redis, h, a)).toEqual([]);
    expect((await h.engine.dispatchStage(a, {})).dispatched).toBe(true);
  });

  it('a dispatch in flight when cancel arrives does not re-create the deferral with its late result', async () => {
    const h = harness();
    const a = ref('b', 'c', 's');
    let answer!: (r: ReturnType<typeof notSent>) => void;
    h.executor.script(a, () => new Promise((resolve) => (answer = resolve)));
    const inFlight = h.engine.dispatchStage(a, {});
    await waitFor(() => h.executor.calls.length === 1, 'executor in flight');
    const c = await h.engine.cancelActiveDispatch(a);
    expect(c.inFlight).toBe(true);
    answer(notSent('no_worker_available'));
    const late = await inFlight;
    expect(late).toMatchObject({ dispatched: false, reason: 'no_worker_available', cancelled: true });
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    expect(await h.engine.queue.getDelayedCount()).toBe(0);
    expect(h.journal).toHaveLength(0);
    expect((await h.engine.dispatchStage(a, {})).dispatched).toBe(true);
  });

  it('removes a waiting enqueued job too, and a cancelled job in flight in the worker is not retried', async () => {
    const h = harness({ retry: { attempts: 5, backoff: { type: 'fixed', delay: 10 } } });
    const a = ref('b', 'c', 's');
    let answer!: (r: ReturnType<typeof notSent>) => void;
    h.executor.script(a, () => new Promise((resolve) => (answer = resolve)));
    await h.engine.enqueue(a, {});
    const worker = h.engine.createWorker();
    const completed: unknown[] = [];
    worker.on('completed', (_job, result) => completed.push(result));
    await waitFor(() => h.executor.calls.length === 1, 'processing');
    await h.engine.cancelActiveDispatch(a);
    answer(notSent('send_failed'));
    await waitFor(() => completed.length === 1, 'job completed without retry');
    expect(completed[0]).toMatchObject({ cancelled: true });
    expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'failed')).toEqual({ wait: 0, delayed: 0, failed: 0 });

    await worker.close(); // not pause(): on a Redis Cluster, BullMQ 6.7's Worker.pause() can hang
    await h.engine.enqueue(a, {});
    expect(await h.engine.queue.getWaitingCount()).toBe(1);
    const r = await h.engine.cancelActiveDispatch(a);
    expect(r.removedJobs).toBe(1);
    expect(await h.engine.queue.getWaitingCount()).toBe(0);
  });
});

describe('C9: the names that say what they do', () => {
  it('cancelStage cancels as cancelActiveDispatch does, and wakeScope wakes a scope as clearDeferrals does', async () => {
    const h = harness();
    const a = ref('book-1', 'ch-1', 'sc-1');
    const b = ref('book-1', 'ch-2', 'sc-1');
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(a, {});
    await h.engine.dispatchStage(b, {});
    expect(await h.engine.cancelStage(a, 'user')).toMatchObject({ hadDeferral: true, removedJobs: 1, reason: 'user' });
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    expect(await h.engine.wakeScope(['book-1', 'ch-2'])).toBe(1);
    expect(await h.engine.isStageDeferred(b)).toBe(false);
  });
});
