import { promote } from '../../../src/bullmq/adapter';
import { harness, notSent, snapshot, expectUnwritten } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';
import { stageJobs } from '../../helpers/observe';

const a = { scope: ['book', 'ch', 'sc'], stage: 'image' };

describe('C18: enqueue adds nothing while the stage has a job waiting, running or deferred', () => {
  it('100 enqueues of one stage make one job', async () => {
    const h = harness();
    const results = await Promise.all(Array.from({ length: 100 }, () => h.engine.enqueue(a, { n: 1 })));
    expect(results.filter((r) => r.added)).toHaveLength(1);
    expect(new Set(results.map((r) => r.jobId)).size).toBe(1);
    expect(await h.engine.queue.getWaitingCount()).toBe(1);
  });

  it('a deferred stage: the check writes nothing and reports until', async () => {
    const h = harness();
    h.executor.script(a, notSent('no_worker_available'));
    const d = await h.engine.dispatchStage(a, {});
    const before = await snapshot(h.redis, h.prefix);
    for (let i = 0; i < 100; i++) {
      const r = await h.engine.enqueue(a, {});
      expect(r).toMatchObject({ added: false, reason: 'deferred' });
      expect(Math.abs((r.until ?? 0) - (d.until ?? 0))).toBeLessThan(1000);
    }
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect(await h.engine.queue.getJobCounts('wait', 'delayed')).toEqual({ wait: 0, delayed: 1 });
  });

  it('a running dispatch: nothing added', async () => {
    const h = harness();
    let release!: () => void;
    h.executor.script(a, () => new Promise((r) => (release = () => r({ dispatched: true, jobs: 1, reason: null }))));
    await h.engine.enqueue(a, {});
    h.engine.createWorker();
    await waitFor(() => h.executor.calls.length === 1, 'running');
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: false, reason: 'dispatch_in_flight' });
    release();
    await waitFor(async () => (await h.engine.queue.getJobCounts('active', 'wait')).active === 0, 'finished');
    expect((await h.engine.enqueue(a, {})).added).toBe(true);
  });

  it('a wake-up waiting after its window ended (marker expired): nothing added', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(a, notSent('no_worker_available'));
    await h.engine.dispatchStage(a, {});
    const [d] = await h.engine.listDeferred();
    await h.redis.del(h.engine.deferredStageKey(a));
    await promote(h.engine.queue, d!.wakeUpJobId);
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: false, reason: 'pending', jobId: d!.wakeUpJobId });
    expect(await h.engine.queue.getWaitingCount()).toBe(1);
  });

  it('a wake-up removed by hand does not block the stage for ever', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(a, notSent('no_worker_available'));
    await h.engine.dispatchStage(a, {});
    const [d] = await h.engine.listDeferred();
    await h.engine.queue.remove(d!.wakeUpJobId);
    await h.redis.del(h.engine.deferredStageKey(a));
    const r = await h.engine.enqueue(a, {});
    expect(r.added).toBe(true);
    // the removed wake-up holds nothing of the stage any more: the new job is the stage's only
    // job, and nothing the engine keeps for the stage names the removed one (C27)
    expect(await stageJobs(h.engine, a)).toEqual([r.jobId]);
    expect((await keptFor(h, a)).filter((k) => k.includes(d!.wakeUpJobId))).toEqual([]);
  });
});
