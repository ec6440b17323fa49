import type IORedis from 'ioredis';
import { StoreKeys } from '../../src/store/keys';

export { fast, latch, sleep, watch } from './jobs';

/** The licence-index members of every stage of the queue. */
export async function members(redis: IORedis, prefix: string, queueName: string): Promise<string[]> {
  return redis.zrange(new StoreKeys(prefix, queueName).index, '0', '-1');
}

/** Jobs of the harness' queue that are active, waiting or delayed. */
export async function queued(h: {
  engine: { queue: { getJobCounts(...s: string[]): Promise<Record<string, number>> } };
}) {
  const c = await h.engine.queue.getJobCounts('active', 'wait', 'delayed', 'prioritized');
  return (c.active ?? 0) + (c.wait ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
}
