import { Worker, type Job } from 'bullmq';
import type { StageRef } from '../../src';
import { notSent, type Harness } from './engine';
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

/**
 * The app's own Worker on `h`'s queue, not attached to the engine, whose stalled check fails a
 * stalled job at once (`maxStalledCount: 0`, every 200 ms); its completed and failed jobs watched.
 */
export function stallFailingWorker(h: Pick<Harness, 'engine' | 'queueName' | 'prefix'>) {
  const worker = new Worker(h.queueName, h.engine.processor, {
    connection: client({ maxRetriesPerRequest: null }),
    prefix: h.prefix,
    stalledInterval: 200,
    maxStalledCount: 0,
  });
  worker.on('error', () => undefined);
  return { worker, ...watch(worker) };
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

/**
 * crash: an attached Worker (stalled check every 300 ms, concurrency 2)
 * running the engine's processor, whose first failure that `crashes` picks is held there: `then`
 * runs (a host's tick meanwhile), BullMQ's lock of the job goes and the stalled check hands it on
 * (`handedOn`), and only then the error reaches BullMQ, as if the process froze or died between
 * the engine's FAIL and BullMQ failing the job. `crashed.job` is that job, once it happened.
 */
export function crashAfterFail(
  h: { queueName: string; prefix: string; engine: { processor: Processor; attachWorker(w: Worker): unknown } },
  crashes: (job: Job, error: Error) => boolean | Promise<boolean>,
  then?: (job: Job) => Promise<unknown>,
) {
  const redis = client();
  const crashed: { job?: Job } = {};
  const worker = new Worker(
    h.queueName,
    async (job: Job, token?: string) => {
      try {
        return await h.engine.processor(job, token);
      } catch (error) {
        if (!crashed.job && (await crashes(job, error as Error))) {
          crashed.job = job;
          await then?.(job);
          await handedOn(redis, `${h.prefix}:${h.queueName}:${job.id}`);
        }
        throw error;
      }
    },
    { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix, stalledInterval: 300, concurrency: 2 },
  );
  worker.on('error', () => undefined);
  h.engine.attachWorker(worker);
  return { worker, crashed, redis };
}

type Processor = (job: Job, token?: string) => Promise<unknown>;

/** Waits until job `id` completed, failed or is gone, and returns that state (`null`: gone). */
export async function settledState(queue: { getJobState(id: string): Promise<string> }, id: string) {
  const stateOf = async () => {
    const s = await queue.getJobState(id);
    return s === 'unknown' ? null : s;
  };
  await waitFor(async () => ['completed', 'failed', null].includes(await stateOf()), `job ${id} finished`, 15_000);
  return stateOf();
}

/**
 * Holds BullMQ's promote of `wakeUp` on `queue` once it ran (a clear's promotion done, its record
 * not sent yet) until `go.open()`; `restore()` puts the real promote back and lets it go.
 */
export function holdPromotion(queue: unknown, wakeUp: string) {
  type Backend = { promote(id: string): Promise<void> };
  const backend = (queue as { getBackend(): Backend }).getBackend();
  const real = backend.promote.bind(backend);
  const go = latch();
  backend.promote = async (id: string) => {
    await real(id);
    if (id === wakeUp) await go.opened;
  };
  return {
    go,
    restore() {
      backend.promote = real;
      go.open();
    },
  };
}

/** Runs BullMQ's stalled check until the job at `key` was handed on (its stalled count past `above`). */
export async function stalledCheck(
  h: { queueName: string; prefix: string },
  redis: ReturnType<typeof client>,
  key: string,
  above: number,
) {
  const checker = new Worker(h.queueName, null, {
    connection: client({ maxRetriesPerRequest: null }),
    prefix: h.prefix,
    autorun: false,
    stalledInterval: 50,
    maxStalledCount: 5,
  });
  try {
    await waitFor(
      async () => {
        await (checker as unknown as { moveStalledJobsToWait(): Promise<void> }).moveStalledJobsToWait();
        return Number(await redis.hget(key, 'stc')) > above;
      },
      'the stalled check handed the job on',
      10_000,
    );
  } finally {
    await checker.close();
  }
}

/** Defers `ref` by a direct dispatch answered `no_worker_available`; returns its wake-up's id. */
export async function deferOnce(h: Harness, ref: StageRef): Promise<string> {
  h.executor.script(ref, notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(ref, {})).toMatchObject({ reason: 'no_worker_available' });
  const [deferred] = await h.engine.listDeferred(ref.scope);
  return deferred!.wakeUpJobId;
}
