import type { ConnectionOptions, KeepJobs } from 'bullmq';
import { z } from 'zod';
import { InvalidOptionsError } from './errors';
import {
  BUILT_IN_OUTCOMES,
  DEFERRED_IDEMPOTENT_TTL_S,
  DEFERRED_STAGE_TTL_S,
  ENGINE_REASONS,
  FAILURE_OUTCOMES,
  type OutcomeOptions,
} from './outcomes';
import type { DeferralJournalEvent, DispatchContext, Executor, StageRef } from './types';

/** Options of `createDispatchEngine`. */
export interface DispatchEngineOptions<P = unknown, R extends string = string> {
  /** An ioredis client (or Cluster) or connection options, as BullMQ takes them. Never closed by the engine when it is a client. */
  connection: ConnectionOptions;
  /** BullMQ queue name. Default `'stage-dispatch'`. */
  queueName?: string;
  /**
   * BullMQ prefix; every key the engine writes starts with it. Default `'bull'`.
   * On a Redis Cluster it must hold a hash tag, e.g. `'{stage}'` (else `InvalidOptionsError`).
   */
  prefix?: string;
  /**
   * Tries to send a stage's jobs downstream. Leave it out for a producer-only
   * engine (a scheduler, an API process): `enqueue`, `isStageDeferred`,
   * `listDeferred`, `cancelActiveDispatch`, `clearDeferrals` and
   * `wakeDeferred` work; `dispatchStage`, `processor` and `createWorker`
   * throw `NoExecutorError`. The engine your workers run has one.
   */
  executor?: Executor<P, NoInfer<R>>;
  /** Returns the stage to PENDING in the host; called once per attempt that sent nothing. */
  rollback?: (ref: StageRef, reason: string, ctx: DispatchContext) => Promise<unknown>;
  /**
   * The resource a stage needs, when a whole pool answers for it (`'gpu-pool'`): while a capacity
   * answer has its gate closed, a dispatch of the stage defers at once, calling no executor, and
   * waits in the resource's line; one probe per window asks again (see docs/guide.md, "One probe
   * per resource"). `undefined`: none (a capacity answer may still name one). Called before
   * each attempt; a name that is not 1..200 characters is `InvalidResourceError`. Default: none.
   */
  resourceOf?: (ref: StageRef, payload: P) => string | undefined;
  /**
   * The order in which a resource's line wakes (a success's `capacityLeft` or slow start, and
   * `wakeDeferred({ resource })`): `'oldest'`, oldest chain first; `'roundRobin'`, one stage of each
   * book (first scope segment) in turn, oldest chain first within each, books in name order from
   * the one after the book the last wake ended on (wakes of one take turns too), so one book with
   * 1,000 waiting does not starve ten with 10. A round-robin wake of `limit` sees the first
   * `limit` + 2,000 stages of the line: a book with none among them waits its turn until it has.
   * Default `'oldest'`.
   */
  lineOrder?: 'oldest' | 'roundRobin';
  /** Host event journal; one `stage_deferred` event per deferral. */
  journal?: (ref: StageRef, event: DeferralJournalEvent) => Promise<unknown>;
  /**
   * Reasons of your own that defer, added to the built-in lists
   * (`CAPACITY_OUTCOMES`, `IDEMPOTENT_OUTCOMES`): e.g.
   * `{ capacity: ['gpu_pool_full'] }`. A reason in neither list is a failure.
   */
  outcomes?: OutcomeOptions<R>;
  windows?: {
    /** Capacity window, seconds, 0.05..600. Default `DEFERRED_STAGE_TTL_S` (30). */
    capacitySeconds?: number;
    /**
     * Longest capacity window, seconds, 1..3600, not below `capacitySeconds`.
     * When larger, the n-th capacity deferral in a row waits
     * `min(capacityMaxSeconds, capacitySeconds × 2^(n-1))` (then jittered
     * downwards); a success, cancel or clear starts again from
     * `capacitySeconds`, an early wake (`wakeDeferred`) does not. Default:
     * `capacitySeconds` (a fixed window).
     */
    capacityMaxSeconds?: number;
    /** Idempotent window, seconds, 0.05..86400. Default `DEFERRED_IDEMPOTENT_TTL_S` (300). */
    idempotentSeconds?: number;
    /**
     * Fraction 0..0.5 by which a window is shortened at random, so stages deferred
     * together do not wake together. Default 0.2 (windows spread over 80..100 %).
     */
    jitter?: number;
  };
  /** Budget for real failures per stage (BullMQ attempts/backoff). Default 3 attempts, exponential 1 s. */
  retry?: {
    attempts?: number;
    backoff?: { type: 'fixed' | 'exponential'; delay: number };
  };
  /**
   * What BullMQ does with a job the engine added (a wake-up, an `enqueue`d job) once it
   * completes, in BullMQ's own shape: `true` removes it (default), `false` keeps it,
   * `{ count, age }` keeps the last `count` or those younger than `age` seconds. Kept jobs are
   * Bull Board's Completed tab: each costs about what its wake-up did while it waited.
   */
  removeOnComplete?: boolean | number | KeepJobs;
  /** Bounds on deferrals in a row per class. */
  limits?: {
    /** After this many capacity deferrals in a row the job fails with `DeferralLimitError`. Default 120 (1 h at 30 s). */
    maxCapacityDeferrals?: number;
    /** After this many idempotent deferrals in a row the stage completes as already done. Default 3. */
    maxIdempotentDeferrals?: number;
  };
  /** In-flight dispatch lock, ms; renewed every third of it while the executor runs. Default 30000. */
  lockMs?: number;
  /** How long the processor delays a job that found a dispatch of its stage in flight, ms. Default 1000. */
  inFlightRetryMs?: number;
  /**
   * Clock skew between a worker host and Redis that a wake-up absorbs, ms. A
   * worker promotes delayed jobs by its own clock; a wake-up that starts while
   * its window still has at most this long to run (by Redis' clock) waits the
   * rest out (delayed, no attempt spent). One with more left was promoted on
   * purpose (Bull Board's Promote) and wakes its stage now. A Worker host whose
   * clock leads Redis' by more is reported (`clockSkew`). Default 1000; 0 to 60000.
   */
  maxClockSkewMs?: number;
  /**
   * Append one line per deferral to the wake-up job's log (Bull Board's Logs tab). Default false:
   * the job data shows the same facts, and the log list is the largest part of a deferred stage's memory.
   */
  jobLog?: boolean;
  /**
   * Durability across a failover. After each deferral, cancel, clear,
   * terminal failure or job added by `enqueue`, the engine sends Redis
   * `WAIT replicas timeoutMs` on the same connection: the job completes (the
   * call returns) only once `replicas` replicas hold the write (or the wait
   * timed out). A `WAIT` that ran on another connection (ioredis resent it)
   * or failed rejects with `ReplicationUnconfirmedError`. When fewer replicas
   * acknowledge, a `replicaLag` event is emitted, the engine goes on, and it
   * stops waiting for `10 × timeoutMs` (a master with no replica in sync would
   * otherwise stall every deferral). `false` turns it off.
   * Default: `{ replicas: 1, timeoutMs: 250 }` on a Redis Cluster connection, `false` otherwise.
   */
  waitForReplicas?: false | { replicas?: number; timeoutMs?: number };
  /**
   * For fault-injection tests only: called at each crash point of an attempt
   * (a test may kill the process there). Not part of the stable API.
   */
  faultHook?: (point: FaultPoint, ref: StageRef) => void | Promise<void>;
}

/** Crash points of one dispatch attempt, in order. */
export type FaultPoint = 'lock-taken' | 'executor-answered' | 'rolled-back' | 'deferral-recorded' | 'released';

const positiveInt = (max: number) => z.number().int().min(1).max(max);
/** A reason of the host's own: what executors answer and events, logs and wake-up data show. */
const reasonName = z.string().min(1).max(100);
const RESERVED_REASONS: readonly string[] = [...FAILURE_OUTCOMES, ...ENGINE_REASONS];

// strict: a misspelt option (`lockMS`, `window`) would otherwise be dropped silently and its default used
const schema = z.strictObject({
  connection: z.custom<ConnectionOptions>((v) => typeof v === 'object' && v !== null, 'an ioredis client or options'),
  queueName: z
    .string()
    .min(1)
    .max(200)
    .refine((s) => !s.includes(':'), 'must not contain `:`')
    .default('stage-dispatch'),
  prefix: z.string().min(1).max(200).default('bull'),
  executor: z.custom<Executor>((v) => typeof v === 'function', 'a function').optional(),
  rollback: z
    .custom<NonNullable<DispatchEngineOptions['rollback']>>((v) => typeof v === 'function', 'a function')
    .optional(),
  journal: z
    .custom<NonNullable<DispatchEngineOptions['journal']>>((v) => typeof v === 'function', 'a function')
    .optional(),
  resourceOf: z
    .custom<NonNullable<DispatchEngineOptions['resourceOf']>>((v) => typeof v === 'function', 'a function')
    .optional(),
  lineOrder: z.enum(['oldest', 'roundRobin'], "'oldest' or 'roundRobin'").default('oldest'),
  outcomes: z
    .object({ capacity: z.array(reasonName).max(100).optional(), idempotent: z.array(reasonName).max(100).optional() })
    .strict()
    .refine(
      (o) =>
        !(o.capacity ?? []).some(
          (r) => (o.idempotent ?? []).includes(r) || BUILT_IN_OUTCOMES.classOf(r) === 'idempotent',
        ) && !(o.idempotent ?? []).some((r) => BUILT_IN_OUTCOMES.classOf(r) === 'capacity'),
      'a reason in one class only (capacity or idempotent)',
    )
    .refine(
      (o) => ![...(o.capacity ?? []), ...(o.idempotent ?? [])].some((r) => RESERVED_REASONS.includes(r)),
      `no documented failure reason (${FAILURE_OUTCOMES.join(', ')}) nor one the engine answers itself (${ENGINE_REASONS.join(', ')})`,
    )
    .optional(),
  windows: z
    .object({
      capacitySeconds: z.number().min(0.05).max(600).default(DEFERRED_STAGE_TTL_S),
      capacityMaxSeconds: z.number().min(1).max(3600).optional(),
      idempotentSeconds: z.number().min(0.05).max(86_400).default(DEFERRED_IDEMPOTENT_TTL_S),
      jitter: z.number().min(0).max(0.5).default(0.2),
    })
    .strict()
    .default({ capacitySeconds: DEFERRED_STAGE_TTL_S, idempotentSeconds: DEFERRED_IDEMPOTENT_TTL_S, jitter: 0.2 }),
  retry: z
    .object({
      attempts: positiveInt(1000).default(3),
      backoff: z
        .object({ type: z.enum(['fixed', 'exponential']), delay: z.number().int().min(0).max(86_400_000) })
        .strict()
        .default({ type: 'exponential', delay: 1000 }),
    })
    .strict()
    .default({ attempts: 3, backoff: { type: 'exponential', delay: 1000 } }),
  limits: z
    .object({
      maxCapacityDeferrals: positiveInt(1_000_000).default(120),
      maxIdempotentDeferrals: positiveInt(1_000_000).default(3),
    })
    .strict()
    .default({ maxCapacityDeferrals: 120, maxIdempotentDeferrals: 3 }),
  removeOnComplete: z
    .union([
      z.boolean(),
      z.number().int().min(0),
      z
        .object({
          age: z.number().int().min(0).optional(),
          count: z.number().int().min(0).optional(),
          limit: z.number().int().min(0).optional(),
        })
        .strict()
        .refine((k) => k.age !== undefined || k.count !== undefined, 'an `age` or a `count`')
        .transform((k) => k as KeepJobs),
    ])
    .default(true),
  lockMs: z.number().int().min(1000).max(3_600_000).default(30_000),
  inFlightRetryMs: z.number().int().min(1).max(3_600_000).default(1000),
  maxClockSkewMs: z.number().int().min(0).max(60_000).default(1000),
  jobLog: z.boolean().default(false),
  waitForReplicas: z
    .union([
      z.literal(false),
      z.object({ replicas: positiveInt(16).default(1), timeoutMs: positiveInt(60_000).default(250) }).strict(),
    ])
    .optional(),
  faultHook: z
    .custom<NonNullable<DispatchEngineOptions['faultHook']>>((v) => typeof v === 'function', 'a function')
    .optional(),
});

/** The options of an engine that has an executor: what the dispatcher and the processor run with. */
export type ResolvedOptions<P = unknown> = Omit<z.output<typeof schema>, 'executor' | 'waitForReplicas' | 'windows'> & {
  executor: Executor<P, string>;
  /** Resolved: `capacityMaxSeconds` defaults to `capacitySeconds`. */
  windows: Omit<z.output<typeof schema>['windows'], 'capacityMaxSeconds'> & { capacityMaxSeconds: number };
  /** Resolved: `false`, or what `WAIT` is sent with. */
  waitForReplicas: false | { replicas: number; timeoutMs: number };
};

/** Resolved options of any engine: without `executor`, a producer-only one. */
export type ResolvedEngineOptions<P = unknown> = Omit<ResolvedOptions<P>, 'executor'> & {
  executor?: Executor<P, string>;
};

/** `waitForReplicas` when the caller did not say: on for a Redis Cluster, where failover is built in. */
export const CLUSTER_WAIT = { replicas: 1, timeoutMs: 250 } as const;

/** Validates options once, at the boundary; throws `InvalidOptionsError` naming the field. */
export function resolveOptions<P>(options: DispatchEngineOptions<P>): ResolvedEngineOptions<P> {
  const parsed = schema.safeParse(options ?? {});
  if (!parsed.success) throw new InvalidOptionsError(formatOptionsError(parsed.error, options));
  const { connection, prefix, queueName } = parsed.data;
  const isCluster = (connection as { isCluster?: unknown }).isCluster === true;
  if (isCluster && hashTagOf(`${prefix}:${queueName}:`) === null) {
    throw new InvalidOptionsError(
      `Expected \`prefix\` to contain a hash tag on a Redis Cluster, e.g. '{${prefix.replace(/[{}]/g, '') || 'stage'}}', ` +
        `got ${JSON.stringify(prefix)}: without one the queue's keys spread over slots and every deferral fails with CROSSSLOT`,
    );
  }
  const waitForReplicas = parsed.data.waitForReplicas ?? (isCluster ? { ...CLUSTER_WAIT } : false);
  const { capacitySeconds, capacityMaxSeconds = capacitySeconds } = parsed.data.windows;
  if (capacityMaxSeconds < capacitySeconds) {
    throw new InvalidOptionsError(
      `Expected \`windows.capacityMaxSeconds\` to be at least \`windows.capacitySeconds\` (${capacitySeconds}), got ${capacityMaxSeconds}`,
    );
  }
  const windows = { ...parsed.data.windows, capacityMaxSeconds };
  return { ...parsed.data, windows, waitForReplicas } as ResolvedEngineOptions<P>;
}

/**
 * Like `formatZodError`, with an unknown option named first and, when it is a
 * near miss of a known one (edit distance ≤ 2, or the same but for case),
 * "did you mean `lockMs`?".
 */
function formatOptionsError(error: z.ZodError, input: unknown): string {
  const unknown: string[] = [];
  const other: z.core.$ZodIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code !== 'unrecognized_keys') {
      other.push(issue);
      continue;
    }
    const at = issue.path.map(String);
    const known = knownKeys(at);
    for (const key of issue.keys) {
      const name = [...at, key].join('.');
      const near = nearestKey(key, known);
      unknown.push(
        near === undefined
          ? `Unknown option \`${name}\` (known: ${known.map((k) => `\`${k}\``).join(', ')})`
          : `Unknown option \`${name}\`: did you mean \`${[...at, near].join('.')}\`?`,
      );
    }
  }
  return [...unknown, ...other.map((issue) => formatIssue(issue, input))].join('; ');
}

/** The option names the schema knows at `path` (top level: `[]`). */
function knownKeys(path: readonly string[]): string[] {
  let node: z.ZodType | undefined = schema;
  for (const key of [...path, undefined]) {
    while (node instanceof z.ZodDefault || node instanceof z.ZodOptional) node = node.unwrap() as z.ZodType;
    if (!(node instanceof z.ZodObject)) return [];
    if (key === undefined) return Object.keys(node.shape);
    node = (node.shape as Record<string, z.ZodType>)[key];
  }
  return [];
}

/** The known key `key` is a near miss of: the same but for case, else the closest within 2 edits. */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  const sameButCase = known.find((k) => k.toLowerCase() === key.toLowerCase());
  if (sameButCase !== undefined) return sameButCase;
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = editDistance(key, k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best;
}

/** Levenshtein distance (insert, delete, substitute one character). */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * The hash tag Redis Cluster hashes every key starting with `base` by (the
 * text between the first `{` and the next `}`, if non-empty), or `null` when
 * `base` does not fix one and keys would land in different slots.
 */
export function hashTagOf(base: string): string | null {
  const open = base.indexOf('{');
  if (open < 0) return null;
  const close = base.indexOf('}', open + 1);
  return close > open + 1 ? base.slice(open + 1, close) : null;
}

/** "Expected `windows.capacitySeconds` to be ..., got 0" from the first issue. */
export function formatZodError(error: z.ZodError, input: unknown): string {
  return error.issues.map((issue) => formatIssue(issue, input)).join('; ');
}

function formatIssue(issue: z.core.$ZodIssue, input: unknown): string {
  const path = issue.path.map(String).join('.');
  const got = valueAt(input, issue.path);
  return `Expected \`${path || 'options'}\`: ${issue.message}, got ${describe(got)}`;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = input;
  for (const key of path) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[key];
  }
  return cur;
}

function describe(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (value === undefined) return 'undefined';
  try {
    const text = JSON.stringify(value);
    return text.length > 60 ? `${text.slice(0, 57)}...` : text;
  } catch {
    return typeof value;
  }
}
