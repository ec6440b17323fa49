import type IORedis from 'ioredis';
import { StoreKeys } from '../../src/store/keys';

export { fast, latch, sleep, watch } from './jobs';

/**
 * INTERNAL ENCODING, not part of the contract (docs/contract.md, "Conflicts and implementation
 * details": licence strings are internal): the members of the queue's licence index, every
 * stage's licences and failed-job records as the engine writes them. No test asserts them any
 * more; a test that needs what a user sees reads `listDeferred`, `isStageDeferred`, the enqueue
 * probe or BullMQ's states (test/helpers/observe.ts, test/helpers/visible.ts).
 */
export async function internalLicenceMembers(redis: IORedis, prefix: string, queueName: string): Promise<string[]> {
  return redis.zrange(new StoreKeys(prefix, queueName).index, '0', '-1');
}

/** Jobs of the harness' queue that are active, waiting or delayed. */
export async function queued(h: {
  engine: { queue: { getJobCounts(...s: string[]): Promise<Record<string, number>> } };
}) {
  const c = await h.engine.queue.getJobCounts('active', 'wait', 'delayed', 'prioritized');
  return (c.active ?? 0) + (c.wait ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
}
