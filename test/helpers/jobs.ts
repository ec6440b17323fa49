import { Worker, type Job } from 'bullmq';
import { client, waitFor } from './redis';

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

/** A promise and the function that resolves it. */
export function latch<T = void>() {
  let open!: (v: T) => void;
  const opened = new Promise<T>((resolve) => (open = resolve));
  return { open, opened };
}

/**
 * An executor that, once called, holds until `release()`, then answers `answer`:
 * `running` resolves when the call has started (a dispatch is in flight).
 */
export function heldExecutor<A>(answer: A) {
  const started = latch();
  const held = latch();
  return {
    executor: async (): Promise<A> => {
      started.open();
      await held.opened;
      return answer;
    },
    running: started.opened,
    release: () => held.open(),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A fixed 10 ms backoff: retries without waiting. */
export const fast = { type: 'fixed' as const, delay: 10 };

/**
 * Fetches the next job of a queue by hand (BullMQ's manual processing): the
 * job is active, locked by BullMQ with `token` for `lockDuration` ms, and
 * nothing renews that lock (no worker runs), as for a worker frozen past it.
 */
export async function fetchBy(
  q: { queueName: string; prefix: string },
  token: string,
  lockDuration = 30_000,
): Promise<Job> {
  // a shared client (closed by closeClients()): on one Redis the returned job can still be moved
  // (completed, failed, delayed) once this Worker is closed; on a Cluster that is not reliable
  // (its connection was seen closed), so a cluster test keeps its own Worker open while it moves
  const w = new Worker(q.queueName, null, {
    connection: client({ maxRetriesPerRequest: null }),
    prefix: q.prefix,
    autorun: false,
    lockDuration,
  });
  try {
    const job = (await w.getNextJob(token, { block: false })) as Job | undefined;
    if (!job) throw new Error('no job to fetch');
    return job;
  } finally {
    await w.close();
  }
}

/**
 * A worker frozen (or dead) in the middle of job `jobKey` (`<prefix>:<queue>:<id>`): BullMQ's
 * lock of it goes, and the stalled check hands the job on (its stalled count grows).
 */
export async function handedOn(
  redis: { del(key: string): Promise<unknown>; hget(key: string, field: string): Promise<string | null> },
  jobKey: string,
): Promise<void> {
  await redis.del(`${jobKey}:lock`);
  await waitFor(async () => Number(await redis.hget(jobKey, 'stc')) > 0, 'handed on', 10_000);
}
