import { Job } from 'bullmq';
import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C15: the wake-up job of a re-deferred stage', () => {
  it('is a new delayed job whose data and log line carry the deferral count', async () => {
    // a long window (the harness's 30 s), so the second deferral stays open while the test reads it;
    // wakeDeferred ends the first one now, instead of waiting out a short window
    const h = harness({ jobLog: true });
    h.executor.fallback = notSent('no_worker_available');
    const { engine } = h;
    const ref = { scope: ['book-1', 'ch-1'], stage: 'video' };
    engine.createWorker({ concurrency: 1 });
    await engine.dispatchStage(ref, null);
    expect((await engine.wakeDeferred()).woken).toEqual([ref]);
    const second = await waitFor(async () => {
      const [d] = await engine.listDeferred(['book-1']);
      return d && d.deferrals === 2 ? d : null;
    }, 'a second deferral');
    const job = (await engine.queue.getJob(second.wakeUpJobId))!;
    expect(await job.isDelayed()).toBe(true);
    expect(job.name).toBe('video');
    expect(job.id).toMatch(new RegExp(`^book-1/ch-1/video@cap\\.${second.deferrals}\\.0\\.0\\.`));
    expect(job.data).toMatchObject({ reason: 'no_worker_available', class: 'capacity', deferrals: second.deferrals });
    const { logs } = await engine.queue.getJobLogs(second.wakeUpJobId);
    expect(logs).toEqual([expect.stringMatching(new RegExp(`deferred #${second.deferrals} \\(capacity\\)`))]);
  });
});

describe('C15: promoting a wake-up job by hand (Bull Board "Promote")', () => {
  it('dispatches the stage now, ending its deferral', async () => {
    const { engine: e, executor } = harness({ windows: { capacitySeconds: 300 } });
    const ref = { scope: ['book-2'], stage: 'image' };
    executor.script(ref, notSent('no_worker_available'));
    await e.dispatchStage(ref, null);
    const [d] = await e.listDeferred();
    e.createWorker();
    await (await e.queue.getJob(d!.wakeUpJobId))!.promote();
    await waitFor(() => executor.calls.length === 2, 'the promoted wake-up to dispatch');
    await waitFor(async () => !(await e.isStageDeferred(ref)), 'the deferral to end');
    expect(await e.listDeferred()).toEqual([]);
  });
});

describe('C15: the wake-up job of a deferred stage reads plainly', () => {
  it('is named after the stage, its data shows reason, class, count; it runs at the window end; one log line (jobLog: true)', async () => {
    const h = harness({ jobLog: true });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, { p: 1 });
    const [d] = await h.engine.listDeferred(['book-1']);
    const job = await Job.fromId(h.engine.queue, d!.wakeUpJobId);
    expect(job!.name).toBe('image');
    expect(job!.id).toMatch(/^book-1\/ch-2\/sc-7\/image@cap\.1\./);
    expect(job!.data).toMatchObject({
      scope: image.scope,
      stage: 'image',
      reason: 'no_worker_available',
      class: 'capacity',
      deferrals: 1,
    });
    // the job runs at the window's end as listed (the marker's expiry): timestamp + delay
    expect(Math.abs(job!.timestamp + job!.delay - d!.until)).toBeLessThan(5);
    const logs = await h.engine.queue.getJobLogs(job!.id as string);
    expect(logs.logs).toHaveLength(1);
    expect(logs.logs[0]).toMatch(/deferred #1 \(capacity\): no_worker_available/);
  });
});
