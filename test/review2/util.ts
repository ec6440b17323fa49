import type { Worker } from 'bullmq';
import type IORedis from 'ioredis';
import { StoreKeys } from '../../src/store/keys';

/** Completed and failed jobs of a worker, as they happen. */
export function watch(worker: Worker) {
  const done: { id: string; result: Record<string, unknown> }[] = [];
  const failed: { id: string; error: Error; attemptsMade: number }[] = [];
  worker.on('completed', (job, result) => done.push({ id: job.id as string, result }));
  worker.on('failed', (job, error) =>
    failed.push({ id: job?.id as string, error, attemptsMade: job?.attemptsMade ?? -1 }),
  );
  return { done, failed };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const fast = { type: 'fixed' as const, delay: 10 };

/** The licence-index members of every stage of the queue. */
export async function members(redis: IORedis, prefix: string, queueName: string): Promise<string[]> {
  return redis.zrange(new StoreKeys(prefix, queueName).index, '0', '-1');
}

export function latch<T = void>() {
  let open!: (v: T) => void;
  const opened = new Promise<T>((resolve) => (open = resolve));
  return { open, opened };
}

/** Jobs of the harness' queue that are active, waiting or delayed. */
export async function queued(h: {
  engine: { queue: { getJobCounts(...s: string[]): Promise<Record<string, number>> } };
}) {
  const c = await h.engine.queue.getJobCounts('active', 'wait', 'delayed', 'prioritized');
  return (c.active ?? 0) + (c.wait ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
}
