import { LONG_WINDOWS, harness } from '../helpers/engine';
import { retriedAfterCancel, stageJobs } from '../helpers/observe';
import { ManualWorker, answer } from './harness';

describe('C14: when a wake-up fails for good (retry budget spent)', () => {
  it('the stage can be enqueued again, and a cancel still reaches the failed wake-up', async () => {
    const h = harness({
      windows: LONG_WINDOWS,
      retry: { attempts: 2, backoff: { type: 'fixed', delay: 0 } },
    });
    const { engine, prefix, queueName } = h;
    const ref = { scope: ['a'], stage: 's' };
    // capacity once, then a real failure for each of the wake-up's two attempts
    h.executor.script(ref, answer('capacity'), answer('failure'), answer('failure'));
    h.executor.fallback = answer('dispatched');
    const worker = new ManualWorker(queueName, prefix);
    let wakeUp: string;
    try {
      await engine.enqueue(ref, {});
      await worker.processNext(engine); // capacity: deferred, wake-up delayed
      const [deferred] = await engine.listDeferred(ref.scope);
      wakeUp = deferred!.wakeUpJobId;
      await (await engine.queue.getJob(wakeUp))!.promote();
      await worker.processNext(engine); // first real failure: retried
      expect(await engine.queue.getJobState(wakeUp)).toBe('waiting');
      // the retry still holds the stage: an enqueue adds nothing
      expect(await engine.enqueue(ref, {})).toMatchObject({ added: false });
      await worker.processNext(engine); // second: budget spent
      expect(await engine.queue.getJobState(wakeUp)).toBe('failed');
      // nothing holds the stage any more: an enqueue adds a job
      expect(await engine.enqueue(ref, {})).toMatchObject({ added: true });
    } finally {
      await worker.close();
    }
    // the failed wake-up, retried by hand after a cancel of the stage (which reaches the job just
    // added too), ends without calling the executor
    const [added] = (await stageJobs(engine, ref)).filter((id) => id !== wakeUp);
    expect(added).toBeDefined();
    const retried = await retriedAfterCancel(h, ref, wakeUp);
    expect({ calls: retried.calls, failedAgain: retried.state === 'failed' }).toEqual({
      calls: 0,
      failedAgain: false,
    });
  });
});
