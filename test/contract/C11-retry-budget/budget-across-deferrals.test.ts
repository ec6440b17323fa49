import { FREE, stageView } from '../../helpers/observe';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { completions } from '../../helpers/attempts';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const short = { windows: { capacitySeconds: 0.3, idempotentSeconds: 0.6, jitter: 0 } };

describe('C11: deferrals never spend the retry budget; real failures do, across deferrals', () => {
  it('capacity outcomes do not count; real failures retry with BullMQ backoff and end after `attempts` in total', async () => {
    const h = harness({ ...short, retry: { attempts: 3, backoff: { type: 'fixed', delay: 50 } } });
    h.executor.script(
      image,
      notSent('send_failed'),
      notSent('no_worker_available'),
      notSent('send_failed'),
      notSent('no_worker_available'),
      notSent('send_failed'),
      SENT,
    );
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = completions(h, worker);
    await waitFor(() => failed.length === 3, 'three real failures');
    await waitFor(async () => (await h.engine.queue.getJobCounts('failed')).failed === 1, 'terminal failure');
    // 5 attempts: 3 failures spent the budget of 3; the 2 deferrals spent nothing. The 6th answer never ran.
    expect(h.executor.calls).toHaveLength(5);
    const [job] = await h.engine.queue.getJobs(['failed']);
    expect(job!.failedReason).toMatch(/send_failed/);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });

  it('a success starts a fresh budget: failures carried by a chain are not charged to the next chain', async () => {
    // attempts: 2, so a chain that has spent one failure has none left.
    const h = harness({ ...short, retry: { attempts: 2, backoff: { type: 'fixed', delay: 20 } } });
    h.executor.script(
      image,
      notSent('no_worker_available'), // the enqueued job defers: wake-up #1
      notSent('send_failed'), // wake-up #1 fails once (1 of 2 spent), BullMQ retries it
      notSent('no_worker_available'), // its retry defers again: wake-up #2 carries that failure
      SENT, // wake-up #2 succeeds: the chain ends
      notSent('no_worker_available'), // a scheduler's dispatchStage defers the stage again: wake-up #3
      notSent('send_failed'), // wake-up #3 fails once: not final in a fresh chain, retried
      SENT,
    );
    const wakeUps: string[] = [];
    const deferrals: number[] = [];
    h.engine.on('deferred', (e) => {
      wakeUps.push(e.wakeUpJobId);
      deferrals.push(e.deferrals);
    });
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done, failed } = completions(h, worker);
    const dispatched = () => done.filter((d) => (d.result as { dispatched?: boolean }).dispatched).length;
    await waitFor(() => dispatched() === 1, 'the first chain dispatched');
    // the chain really carried a failure: wake-up #1 failed once, and its chain went on (#2 its second deferral)
    expect(wakeUps).toHaveLength(2);
    expect(deferrals).toEqual([1, 2]);
    expect(failed.map((f) => f.id)).toEqual([wakeUps[0]]);
    expect(await stageView(h.engine, image)).toEqual(FREE);

    // the next chain starts at 0: its wake-up may fail once and still be retried
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'no_worker_available' });
    expect(wakeUps[2]).toMatch(/@cap\.1\.0\.0\./);
    await waitFor(
      async () => dispatched() === 2 || ((await h.engine.queue.getJobCounts('failed')).failed ?? 0) > 0,
      'the second chain to end',
    );
    expect(await h.engine.queue.getJobCounts('failed')).toEqual({ failed: 0 });
    expect(dispatched()).toBe(2);
    expect(failed.map((f) => f.id)).toEqual([wakeUps[0], wakeUps[2]]);
    expect(h.executor.calls).toHaveLength(7);
  });
});
