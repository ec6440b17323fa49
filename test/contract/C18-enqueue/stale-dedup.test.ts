import type { Job, JobsOptions, Queue } from 'bullmq';
import { addDeduplicated, redisClient } from '../../../src/bullmq/adapter';
import { harness } from '../../helpers/engine';

/**
 * Check of the adapter's stale deduplication key recovery
 * (`addDeduplicated`), as it runs on BullMQ 5.81 and 6.0.0: their add returns
 * the job a deduplication key names even when that job is gone. On later 6.x
 * BullMQ recovers the key itself, so `queue.add` is wrapped here to answer as
 * 5.81 does (the same test fails without the wrapper in the 5.81 pair).
 */
const image = { scope: ['book-1'], stage: 'image' };

/** queue.add as BullMQ 5.81 runs it: a deduplication key naming a gone job returns that job, nothing added. */
function asBullMQ581(queue: Queue, meanwhile?: () => Promise<unknown>) {
  const add = queue.add.bind(queue);
  return jest.spyOn(queue, 'add').mockImplementation(async (name: string, data: unknown, opts?: JobsOptions) => {
    const client = (await redisClient(queue)) as unknown as { get(k: string): Promise<string | null> } & {
      exists(k: string): Promise<number>;
    };
    const dedup = opts?.deduplication?.id;
    const named = dedup === undefined ? null : await client.get(queue.toKey(`de:${dedup}`));
    if (named && !(await client.exists(queue.toKey(named)))) {
      const then = meanwhile;
      meanwhile = undefined;
      await then?.();
      return { id: named } as Job;
    }
    return add(name, data, opts);
  });
}

describe('C18: addDeduplicated and a stale deduplication key', () => {
  it('two enqueues meeting a stale key add one job, and the other answers pending with that live job, not the lost one', async () => {
    const h = harness();
    const first = await h.engine.enqueue(image, {});
    const base = `${h.prefix}:${h.queueName}`;
    const lost = first.jobId!;
    // an outage took the job (its hash and its place in wait), not its deduplication key
    await h.redis.del(`${base}:${lost}`);
    await h.redis.lrem(`${base}:wait`, 0, lost);
    const spy = asBullMQ581(h.engine.queue);
    try {
      const [a, b] = await Promise.all([h.engine.enqueue(image, {}), h.engine.enqueue(image, {})]);
      const live = await h.engine.queue.getWaiting();
      expect(live.map((j) => j.id)).toHaveLength(1);
      const added = [a, b].filter((r) => r.added);
      const pending = [a, b].filter((r) => !r.added);
      expect(added).toEqual([{ added: true, reason: null, jobId: live[0]!.id, payloadTaken: true }]);
      // the other enqueue met the key too: its answer names the job that is there, not the lost one
      expect(pending).toEqual([{ added: false, reason: 'pending', jobId: live[0]!.id, payloadTaken: false }]);
    } finally {
      spy.mockRestore();
    }
  });

  it('an addDeduplicated whose add returned the lost job after another caller recovered the key returns that live job, not the lost one', async () => {
    const h = harness();
    const queue = h.engine.queue;
    const base = `${h.prefix}:${h.queueName}`;
    const sid = 'book-1/image';
    const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };
    const opts = (jobId: string): JobsOptions => ({ jobId, deduplication: { id: sid }, removeOnComplete: true });
    await queue.add('image', data, opts(`${sid}@r.lost0001`));
    await h.redis.del(`${base}:${sid}@r.lost0001`);
    await h.redis.lrem(`${base}:wait`, 0, `${sid}@r.lost0001`);
    // the first caller's add returns the lost job; before its recovery runs, a second caller's
    // addDeduplicated meets the key, recovers it and adds its job
    let second: Job | undefined;
    const spy = asBullMQ581(queue, async () => {
      second = await addDeduplicated(queue, 'image', data, opts(`${sid}@r.b0000001`));
    });
    try {
      const first = await addDeduplicated(queue, 'image', data, opts(`${sid}@r.a0000001`));
      expect(second?.id).toBe(`${sid}@r.b0000001`);
      expect(await queue.getJobState(`${sid}@r.b0000001`)).toBe('waiting');
      // the first is deduplicated to the second's job, which is there, not to the lost one
      expect(first.id).toBe(`${sid}@r.b0000001`);
    } finally {
      spy.mockRestore();
    }
  });
});
