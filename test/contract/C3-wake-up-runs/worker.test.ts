import { promote } from '../../../src/bullmq/adapter';
import { FREE, revokeWakeUp, stageView } from '../../helpers/observe';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { completions } from '../../helpers/attempts';
import { watch } from '../../helpers/jobs';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const short = { windows: { capacitySeconds: 0.3, idempotentSeconds: 0.6, jitter: 0 } };

describe('C3: the stage comes back by itself when the window ends', () => {
  it('the delayed wake-up carries payload and buildId and dispatches again through a real Worker', async () => {
    const h = harness(short);
    h.executor.script(image, notSent('no_worker_available'), notSent('no_worker_available'), SENT);
    const r = await h.engine.enqueue(image, { scene: 7 }, { buildId: 'build-3' });
    expect(r.added).toBe(true);
    const worker = h.engine.createWorker();
    const { done } = completions(h, worker);
    await waitFor(() => h.executor.calls.length === 3 && done.length === 3, 'three attempts');
    // a job's call is never forced, with a build or without (force is a direct call's option)
    expect(h.executor.calls.map((c) => [c.payload, c.buildId, c.force])).toEqual([
      [{ scene: 7 }, 'build-3', false],
      [{ scene: 7 }, 'build-3', false],
      [{ scene: 7 }, 'build-3', false],
    ]);
    expect(h.journal.map((j) => (j.event as { deferrals: number }).deferrals)).toEqual([1, 2]);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(await h.engine.listDeferred()).toEqual([]);
    expect(await stageView(h.engine, image)).toEqual(FREE);
  });

  it('a restart of every worker loses nothing: a new engine picks the wake-up up', async () => {
    const h = harness(short);
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, { v: 1 }, { buildId: 'b' });
    await h.engine.close();
    const h2 = harness(short, { prefix: h.prefix, queueName: h.queueName });
    h2.engine.createWorker();
    await waitFor(() => h2.executor.calls.length === 1, 'wake-up dispatched by the new engine');
    expect(h2.executor.calls[0]).toMatchObject({ payload: { v: 1 }, buildId: 'b' });
    await waitFor(
      async () => (await h2.engine.queue.getJobCounts('delayed', 'wait', 'active')).delayed === 0,
      'drained',
    );
  });

  it("buildId '' reaches the executor as '' after a wake-up", async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {}, { buildId: '' });
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'woken');
    expect(h.executor.calls.map((c) => c.buildId)).toEqual(['', '']);
  });
});

describe('C3: one wake-up per deferred stage', () => {
  it('a wake-up that starts a few ms before its own marker expires is not swallowed by it', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    // The window is still open (marker alive) but the wake-up runs now: it must recognise its own marker.
    const id = (await h.engine.listDeferred())[0]!.wakeUpJobId;
    await promote(h.engine.queue, id);
    h.engine.createWorker();
    await waitFor(() => h.executor.calls.length === 2, 'wake-up dispatched');
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('a wake-up that lost its licence does nothing', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    const id = (await h.engine.listDeferred())[0]!.wakeUpJobId;
    await revokeWakeUp(h.redis, h, id);
    await h.redis.del(h.engine.deferredStageKey(image));
    await promote(h.engine.queue, id);
    const worker = h.engine.createWorker();
    const { done } = completions(h, worker);
    await waitFor(() => done.length === 1, 'stale wake-up completed');
    expect(done[0]!.result).toMatchObject({ reason: 'stale_wake_up', retryable: false });
    expect(h.executor.calls).toHaveLength(1);
  });
});

describe('C3: a job that fails after its deferral was written is not dispatched twice', () => {
  it('the retried enqueued job finds it was superseded by its deferral and stops; the stage is sent once', async () => {
    let thrown = false;
    const h = harness({
      windows: { capacitySeconds: 0.05, jitter: 0 },
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 300 } },
      // as if the connection dropped after the deferral was written (e.g. ReplicationUnconfirmedError)
      faultHook: (point) => {
        if (point === 'deferral-recorded' && !thrown) {
          thrown = true;
          throw new Error('connection closed after the deferral was written');
        }
      },
    });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done } = completions(h, worker);
    // the wake-up dispatches (window 50 ms); the enqueued job, retried after 300 ms, stops at its begin
    await waitFor(() => done.length === 2, 'the wake-up and the retried job completed');
    expect(h.executor.calls).toHaveLength(2); // the capacity answer, then the wake-up's dispatch
    const reasons = done.map((d) => (d.result as { reason: string | null }).reason);
    expect(reasons.sort()).toEqual(['superseded', null].sort());
    expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'active', 'failed')).toEqual({
      wait: 0,
      delayed: 0,
      active: 0,
      failed: 0,
    });
  });
});
