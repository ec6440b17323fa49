import { Worker, type Job } from 'bullmq';
import type IORedis from 'ioredis';
import { createDispatchEngine, type DispatchEngine } from '../../src/engine';
import type { DispatchEngineOptions } from '../../src/options';
import { stageId } from '../../src/stage-ref';
import { jobIdOfLicence } from '../../src/job-data';
import type { ExecutorResult, StageRef } from '../../src/types';
import { keysUnder, redisOptions } from '../helpers/redis';

/** SOAK=1 selects the long versions; a number from env overrides a default. */
export const SOAK = process.env.SOAK === '1';
export function envInt(name: string, ci: number, soak: number): number {
  const v = process.env[name];
  if (v !== undefined && v !== '') return Number(v);
  return SOAK ? soak : ci;
}

/** A seed printed by every randomised test, so a run can be reproduced with `SEED=<n>`. */
export function seedFor(name: string): number {
  const seed = process.env.SEED ? Number(process.env.SEED) : Math.floor(Math.random() * 2 ** 31);

  console.log(`[reliability] ${name}: seed ${seed} (reproduce with SEED=${seed})`);
  return seed;
}

/** A small deterministic PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What a scripted executor answers. `failure` is a real (non-deferrable) failure. */
export type Outcome = 'dispatched' | 'capacity' | 'idempotent' | 'failure';

export function answer(outcome: Outcome): ExecutorResult<string> {
  switch (outcome) {
    case 'dispatched':
      return { dispatched: true, jobs: 1, reason: null };
    case 'capacity':
      return { dispatched: false, jobs: 0, reason: 'no_worker_available' };
    case 'idempotent':
      return { dispatched: false, jobs: 0, reason: 'already_completed' };
    case 'failure':
      return { dispatched: false, jobs: 0, reason: 'downstream_rejected' };
  }
}

/**
 * A Worker that does not run by itself: the test fetches one job at a time
 * and hands it to the engine's real processor, then completes or fails it
 * the way BullMQ's own loop would.
 */
export class ManualWorker {
  readonly worker: Worker;
  private n = 0;

  constructor(queueName: string, prefix: string, opts: { maxStalledCount?: number } = {}) {
    this.worker = new Worker(queueName, null, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null } as never,
      prefix,
      autorun: false,
      ...opts,
    });
  }

  /** Fetches the next waiting job (a due delayed one is promoted first), with the token it holds; `null` when none. */
  async fetch(): Promise<{ job: Job; token: string } | null> {
    const token = `manual-${++this.n}`;
    const job = (await this.worker.getNextJob(token, { block: false })) as Job | undefined;
    return job ? { job, token } : null;
  }

  /** Hands a fetched job to the engine's processor, then completes or fails it as BullMQ's loop would. */
  async run(engine: DispatchEngine, job: Job, token: string): Promise<{ job: Job; result?: unknown; error?: Error }> {
    try {
      const result = await engine.processor(job, token);
      await job.moveToCompleted(result, token, false);
      return { job, result };
    } catch (error) {
      const err = error as Error;
      if (err.name === 'DelayedError') return { job, error: err };
      await job.moveToFailed(err, token, false);
      return { job, error: err };
    }
  }

  /** Fetches the next waiting job and processes it; `null` when there is none. */
  async processNext(engine: DispatchEngine): Promise<{ job: Job; result?: unknown; error?: Error } | null> {
    const next = await this.fetch();
    return next ? this.run(engine, next.job, next.token) : null;
  }

  /**
   * One pass of BullMQ's stalled-job check, now (its `stalled-check` throttle
   * key is dropped first): the first pass marks the active jobs, the next one
   * moves those whose job lock is gone back to wait, at the head of the line.
   */
  async stalledCheck(redis: IORedis, prefix: string, queueName: string): Promise<void> {
    await redis.del(`${prefix}:${queueName}:stalled-check`);
    await (this.worker as unknown as { moveStalledJobsToWait(): Promise<void> }).moveStalledJobsToWait();
  }

  close(): Promise<void> {
    return this.worker.close();
  }
}

/** BullMQ's own structural keys of a queue, which may remain after a drain. */
const BULLMQ_QUEUE_KEYS = new Set(['id', 'meta', 'events', 'stalled-check', 'marker', 'limiter', 'pc', 'metrics']);
/**
 * The engine's own queue-level keys (never per stage): the fencing counter, the wake sequences,
 * the set of stage kinds with a wait index (a few members, kept).
 */
const ENGINE_QUEUE_KEYS = new Set(['sd:fence', 'sd:wseq', 'sd:wqk']);

/**
 * Keys under the prefix that belong to no stage after a drain: any engine key
 * (`sd:*`), any dedup key, any job hash or job list. Failed jobs are listed
 * in `failedOk` (they are an end, kept by BullMQ on purpose).
 */
export async function orphanKeys(redis: IORedis, prefix: string, queueName: string, failedOk = new Set<string>()) {
  const base = `${prefix}:${queueName}:`;
  const out: string[] = [];
  for (const key of await keysUnder(redis, prefix)) {
    const rest = key.startsWith(base) ? key.slice(base.length) : key;
    if (BULLMQ_QUEUE_KEYS.has(rest) || ENGINE_QUEUE_KEYS.has(rest) || rest.startsWith('sd:wseq:')) continue;
    if (rest === 'failed' && failedOk.size > 0) continue;
    // a job failed for good keeps its licence member, marked `?` (a cancel or a retry by hand can reach it)
    if (rest === 'sd:licences' && failedOk.size > 0) {
      const members = await redis.zrange(key, '0', '-1');
      if (members.every((m) => m.endsWith('?') && failedOk.has(jobIdOfLicence(m)))) continue;
    }
    const jobId = rest.replace(/:logs$/, '');
    if (failedOk.has(jobId)) continue;
    out.push(rest);
  }
  return out;
}

export function sidOf(ref: StageRef): string {
  return stageId(ref);
}

export type EngineOpts = Partial<DispatchEngineOptions> & Pick<DispatchEngineOptions, 'executor'>;

export function engineFor(prefix: string, queueName: string, opts: EngineOpts): DispatchEngine {
  return createDispatchEngine({
    connection: redisOptions(),
    prefix,
    queueName,
    ...opts,
  } as DispatchEngineOptions);
}

/** A promise with its resolve function, for latches. */
export function latch<T = void>(): { promise: Promise<T>; open: (v: T) => void } {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

/** Engine options shared by the fleet's parent (enqueue, cancel) and its worker processes. */
export const FLEET_ENGINE_OPTIONS = {
  windows: { capacitySeconds: 0.2, idempotentSeconds: 0.1, jitter: 0.5 },
  // budgets large enough that no stage of the fleet tests ends other than dispatched or cancelled
  retry: { attempts: 1000, backoff: { type: 'fixed' as const, delay: 20 } },
  limits: { maxCapacityDeferrals: 100_000, maxIdempotentDeferrals: 100_000 },
  lockMs: 1000,
  inFlightRetryMs: 100,
  jobLog: false,
};

/** Jest timeout of the long tests: 15 min in CI, 1 h in the soak run. */
export const LONG_MS = SOAK ? 3_600_000 : 900_000;

// Engines by hand (engineFor), not harness(): a race builds and closes its engines inside one property run, many per test.
/** An engine whose executor always answers `outcome` (60 s windows, no jitter), and its call count. */
export function countingEngine(
  prefix: string,
  queueName: string,
  outcome: Outcome,
  extra: Partial<Parameters<typeof engineFor>[2]> = {},
) {
  let n = 0;
  const engine = engineFor(prefix, queueName, {
    executor: async () => {
      n += 1;
      return answer(outcome);
    },
    windows: { capacitySeconds: 60, jitter: 0 },
    ...extra,
  });
  return { engine, calls: () => n };
}
export const capacityEngine = (
  prefix: string,
  queueName: string,
  extra: Partial<Parameters<typeof engineFor>[2]> = {},
) => countingEngine(prefix, queueName, 'capacity', extra);
