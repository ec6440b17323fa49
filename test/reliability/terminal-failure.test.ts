import { harness } from '../helpers/engine';
import { ManualWorker, answer, type Outcome } from './harness';

describe('C14: when a wake-up fails for good (retry budget spent)', () => {
  it('marks its licence failed (`?`), so the stage can be enqueued again', async () => {
    let next: Outcome = 'capacity';
    const { engine, redis, prefix, queueName } = harness({
      executor: async () => answer(next),
      windows: { capacitySeconds: 600, jitter: 0 },
      retry: { attempts: 2, backoff: { type: 'fixed', delay: 0 } },
    });
    const worker = new ManualWorker(queueName, prefix);
    const ref = { scope: ['a'], stage: 's' };
    const index = `${prefix}:${queueName}:sd:licences`;
    try {
      await engine.enqueue(ref, {});
      await worker.processNext(engine); // capacity: deferred, wake-up delayed
      const [licence] = await redis.zrange(index, '0', '-1');
      await (await engine.queue.getJob(licence!))!.promote();
      next = 'failure';
      await worker.processNext(engine); // first real failure: retried
      expect(await engine.queue.getJobState(licence!)).toBe('waiting');
      expect(await redis.zcard(index)).toBe(1);
      await worker.processNext(engine); // second: budget spent
      expect(await engine.queue.getJobState(licence!)).toBe('failed');
      expect(await redis.zrange(index, '0', '-1')).toEqual([`${licence}?`]);
      expect(await engine.enqueue(ref, {})).toMatchObject({ added: true });
    } finally {
      await worker.close();
    }
  });
});
