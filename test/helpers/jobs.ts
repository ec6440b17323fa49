import type { Worker } from 'bullmq';

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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A fixed 10 ms backoff: retries without waiting. */
export const fast = { type: 'fixed' as const, delay: 10 };
