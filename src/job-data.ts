import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { InvalidJobDataError, InvalidJobOptionsError, UnsupportedJobVersionError } from './errors';
import { formatZodError } from './options';
import { MAX_SCOPE_SEGMENTS } from './stage-ref';
import type { OutcomeClass, StageRef } from './types';

/**
 * The data of a dispatch job. A wake-up job also shows, for Bull Board, why
 * its stage is deferred (reason, class, deferral count; Bull Board shows the
 * window's end as the job's "will run at"); the job id says whether a job is
 * a wake-up, and its delay when the window ends.
 */
export interface DispatchJobData<P = unknown> {
  v: 1;
  scope: string[];
  stage: string;
  payload: P;
  buildId?: string;
  reason?: string;
  class?: OutcomeClass;
  /** Deferrals of `class` in a row, this one included. */
  deferrals?: number;
  /** The resource the stage waits for (its gate and line), when it has one. */
  resource?: string;
}

/** The wire format version this worker reads; see docs/producers.md, "Versioning". */
export const JOB_DATA_VERSION = 1;

const segment = z.string().min(1);

/**
 * The data of a dispatch job as a worker reads it: the contract a producer in
 * any language writes to (`npm run schema` publishes it as JSON Schema in
 * schema/). Keys it does not name are ignored.
 */
export const dispatchJobDataSchema = z
  .object({
    v: z.literal(JOB_DATA_VERSION).describe('Wire format version. A worker fails a job of a version it does not read.'),
    scope: z
      .array(segment)
      .min(1)
      .max(MAX_SCOPE_SEGMENTS)
      .describe('The stage ref\'s scope, outermost first, e.g. ["book-1", "ch-2"].'),
    stage: segment.describe('The stage kind, e.g. "image"; also the BullMQ job name.'),
    payload: z.unknown().describe('What the executor gets; any JSON value (null when there is none).'),
    buildId: z.string().optional().describe('Optional; passed to the executor.'),
    reason: z.string().optional().describe('Wake-up only (engine): the outcome that deferred the stage.'),
    class: z.enum(['capacity', 'idempotent']).optional().describe('Wake-up only (engine): the class of the deferral.'),
    deferrals: z.number().optional().describe('Wake-up only (engine): deferrals of `class` in a row.'),
    resource: z
      .string()
      .optional()
      .describe('Wake-up only (engine): the resource the stage waits for (its gate and line).'),
  })
  .meta({
    title: 'bullmq-stage-deferral dispatch job data, v1',
    description:
      'The data of a BullMQ job on the dispatch queue. Ids, options and the stage-id encoding: docs/producers.md.',
  });

const optional = (v: unknown, type: 'string' | 'number') => v === undefined || typeof v === type;
const isSegment = (v: unknown) => typeof v === 'string' && v.length > 0;

/** The rules of `dispatchJobDataSchema`, by hand: true when zod would accept `data` (its unknown keys aside). */
function isJobData(data: unknown): data is DispatchJobData {
  // Stryker disable next-line ConditionalExpression: equivalent: job data is parsed JSON (BullMQ reads none as {}), never undefined, and a string, number or boolean has no `v`
  if (typeof data !== 'object' || data === null) return false;
  const d = data as Record<string, unknown>;
  if (d.v !== JOB_DATA_VERSION || !isSegment(d.stage) || !Array.isArray(d.scope)) return false;
  const scope = d.scope as unknown[];
  if (scope.length < 1 || scope.length > MAX_SCOPE_SEGMENTS) return false;
  for (const segment of scope) if (!isSegment(segment)) return false;
  return (
    optional(d.buildId, 'string') &&
    optional(d.reason, 'string') &&
    (d.class === undefined || d.class === 'capacity' || d.class === 'idempotent') &&
    optional(d.deferrals, 'number') &&
    optional(d.resource, 'string')
  );
}

/** The data of a dispatch job for a stage; a wake-up adds why it waits. */
export function dispatchJobData<P>(
  ref: StageRef,
  payload: P,
  buildId: string | undefined,
  deferral?: Pick<DispatchJobData, 'reason' | 'class' | 'deferrals' | 'resource'>,
): DispatchJobData<P> {
  return {
    v: 1,
    scope: [...ref.scope],
    stage: ref.stage,
    payload,
    ...(buildId === undefined ? {} : { buildId }),
    ...deferral,
  };
}

/**
 * Checks a job's data: a hand-written check of the shape first (this runs once
 * per job), zod only for a malformed one, to word the error.
 */
export function parseJobData(data: unknown, jobId: string | undefined): DispatchJobData {
  if (isJobData(data)) return data;
  const v = (data as { v?: unknown } | null)?.v;
  if (Number.isInteger(v) && v !== JOB_DATA_VERSION && (v as number) > 0) {
    throw new UnsupportedJobVersionError(v as number, jobId);
  }
  const parsed = dispatchJobDataSchema.safeParse(data);
  // Stryker disable next-line ConditionalExpression: equivalent: isJobData accepts all that zod accepts, so zod never succeeds here
  if (!parsed.success) {
    // a job added with a plain queue.add: say how a dispatch job is added, before what is wrong with it
    // Stryker disable next-line ConditionalExpression,LogicalOperator: equivalent: job data is parsed JSON: null, a string, a number or a boolean has no `v`, so `v === undefined` alone decides
    const plain = typeof data !== 'object' || data === null || v === undefined;
    const how = plain
      ? 'it was not added by the dispatch contract: add dispatch jobs with `engine.enqueue(ref, payload)` ' +
        '(or, from another language, as docs/producers.md says); '
      : '';
    throw new InvalidJobDataError(
      `Malformed dispatch job ${jobId ?? '?'}: ${how}${formatZodError(parsed.error, data)}`,
      jobId,
    );
  }
  return parsed.data as DispatchJobData;
}

/** What a stage's chain of deferrals has consumed so far. Reset by success, cancel and clear. */
export interface ChainState {
  capacity: number;
  idempotent: number;
  /** Real failures consumed from the retry budget by earlier jobs of the chain. */
  failures: number;
}

export const FRESH_CHAIN: ChainState = Object.freeze({ capacity: 0, idempotent: 0, failures: 0 });

const RAND = 4;

function nonce(): string {
  const n = randomBytes(4).readUInt32BE(0) % 36 ** RAND;
  return n.toString(36).padStart(RAND, '0');
}

const CLASS_TAG = { capacity: 'cap', idempotent: 'idem' } as const;

/**
 * A wake-up job id:
 * `<stageId>@<cap|idem>.<capacity deferrals>.<idempotent deferrals>.<failures>.<until base36><nonce>`,
 * e.g. `book-1/ch-2/sc-7/image@cap.3.0.0.mj3k2x1a7f2b`. It names the stage,
 * the class of the deferral, the chain state and the window's end, and is
 * unique per deferral. Valid for BullMQ: it contains `@`, never `:`.
 */
export function wakeUpJobId(sid: string, cls: OutcomeClass, chain: ChainState, until: number): string {
  const t = `${until.toString(36)}${nonce()}`;
  return `${sid}@${CLASS_TAG[cls]}.${chain.capacity}.${chain.idempotent}.${chain.failures}.${t}`;
}

/** The id of a job added by `enqueue`. */
export function readyJobId(sid: string): string {
  return `${sid}@r.${Date.now().toString(36)}${nonce()}`;
}

/** The suffix of an id `readyJobId` makes, matched from its `lastIndex` (the character after the `@`) on. */
const READY_SUFFIX = /r\.[0-9a-z]+$/y;

/** `checkJobOptions`' error for `job`. */
function fail(job: JobIdentity, what: string): never {
  throw new InvalidJobOptionsError(`Dispatch job ${job.id} ${what} (docs/producers.md, "Job options")`, job.id);
}

/** What of a job's id and options `checkJobOptions` reads (a BullMQ job has them). */
export interface JobIdentity {
  id: string;
  /** What of its data tells an engine's wake-up (`reason`, `class`). */
  data?: { reason?: unknown; class?: unknown } | null;
  deduplicationId?: string;
  /** A flow child's parent (`<prefix>:<queue>:<id>`): BullMQ allows no deduplication on such a job. */
  parentKey?: string;
  opts: {
    attempts?: unknown;
    backoff?: unknown;
    deduplication?: { id?: unknown; ttl?: unknown; extend?: unknown; replace?: unknown };
  };
}

/** How a dispatch job is added, said to one that was not. */
const HOW_TO_ADD =
  'add dispatch jobs with `engine.enqueue(ref, payload)` (or, from another language, as docs/producers.md says: ' +
  "id `<stageId>@r.…`, deduplication id the stage id); to run a failed one again, retry it (Bull Board's Retry, `job.retry()`)";

/**
 * The producer contract on a job's id and options (docs/producers.md, "Job
 * options"), for the stage id `sid` its data encodes to. A dispatch job is one
 * the engine made (a wake-up, `<sid>@cap.…`/`<sid>@idem.…`, with wake-up data)
 * or one a producer added (`<sid>@r.<base36>`, with deduplication id `sid` and
 * no `ttl`, `extend` or `replace`: its key must hold while the job waits, as a
 * cancel reaches a waiting job through it and a second add meets it; retry
 * options the engine applies, `attempts` a positive integer and `backoff`
 * `{ type: 'fixed' | 'exponential', delay: ms }`, or none). Any other job (a
 * plain `queue.add`, a job re-added by hand under an id of its own) is refused:
 * it is never dispatched. Throws `InvalidJobOptionsError`.
 */
export function checkJobOptions(job: JobIdentity, sid: string): void {
  const at = job.id.indexOf('@');
  if (job.id.startsWith('repeat:'))
    fail(
      job,
      "is a job scheduler's tick, no dispatch job: schedule a job on a queue of your own whose processor calls " +
        '`engine.enqueue(ref, payload)`',
    );
  if (at < 0) fail(job, `was not added as a dispatch job: ${HOW_TO_ADD}`);
  // compared in place (this runs once per job): the id's part before its first `@` is `sid`
  if (at !== sid.length || !job.id.startsWith(sid)) {
    fail(
      job,
      `names stage id ${JSON.stringify(job.id.slice(0, at))}, but its data's scope and stage encode to ${JSON.stringify(sid)}: ` +
        "the producer's stage-id encoding differs from this library's",
    );
  }
  // a wake-up id is the engine's: its data says why the stage waits. One without (a producer
  // that copied the id's shape) would complete as a stale wake-up without a word
  if (WAKE_UP_ID.test(job.id.slice(at))) {
    const d = job.data;
    if (d?.reason === undefined && d?.class === undefined)
      fail(
        job,
        "has a wake-up id (the engine's own, `@cap.…`/`@idem.…`) but no wake-up data: a producer uses `<stageId>@r.…`",
      );
    return;
  }
  READY_SUFFIX.lastIndex = at + 1;
  if (!READY_SUFFIX.test(job.id)) fail(job, `has no dispatch job id (\`<stageId>@r.…\`): ${HOW_TO_ADD}`);
  const dedup = job.deduplicationId ?? job.opts.deduplication?.id;
  // BullMQ allows no deduplication on a flow's child: nothing could find it while it waits (a
  // cancel, an enqueue), so it is no dispatch job
  if (dedup === undefined && job.parentKey !== undefined)
    fail(
      job,
      "is a flow's child, which BullMQ cannot deduplicate, so a cancel or an enqueue could not find it while it " +
        "waits: enqueue the stage from the parent's processor, or follow the engine's `dispatched` event",
    );
  if (dedup !== sid) {
    fail(
      job,
      `must be added with deduplication id ${JSON.stringify(sid)} (its stage id), got ${JSON.stringify(dedup)}`,
    );
  }
  const { ttl, extend, replace } = job.opts.deduplication ?? {};
  if (ttl !== undefined || extend !== undefined || replace !== undefined) {
    fail(
      job,
      `must be added with deduplication { id } only, got ${JSON.stringify(job.opts.deduplication)}: a key with a ttl ` +
        'expires while the job waits, and a cancel then no longer reaches it nor does a second add meet it',
    );
  }
  checkRetryOptions(job);
}

/** A producer's retry options: `attempts` a positive integer, `backoff` BullMQ's (or none). */
function checkRetryOptions(job: JobIdentity): void {
  const { attempts, backoff } = job.opts;
  if (attempts !== undefined && !(Number.isInteger(attempts) && (attempts as number) > 0)) {
    fail(
      job,
      `must have \`attempts\` a positive integer, got ${JSON.stringify(attempts)}` +
        (attempts === 0 ? ' (BullMQ stores 0 when a job is added without attempts: give the budget, e.g. 3)' : ''),
    );
  }
  // a custom type is BullMQ's to apply (the Worker's settings.backoffStrategy); its own two need a delay
  const b = backoff as { type?: unknown; delay?: unknown } | undefined;
  const builtIn = b?.type === 'fixed' || b?.type === 'exponential';
  if (
    b !== undefined &&
    !(typeof b.type === 'string' && b.type !== '' && (!builtIn || (typeof b.delay === 'number' && b.delay >= 0)))
  ) {
    fail(
      job,
      `must have \`backoff\` { type: 'fixed' | 'exponential', delay: ms } or { type: '<your strategy's name>' }, got ${JSON.stringify(backoff)}`,
    );
  }
}

const WAKE_UP_SUFFIX = /@(cap|idem)\.(\d+)\.(\d+)\.(\d+)\.([0-9a-z]+)[!?]?$/;
/** A wake-up job id's part from its `@` on (no licence mark). */
const WAKE_UP_ID = /^@(cap|idem)\.\d+\.\d+\.\d+\.[0-9a-z]+$/;

/**
 * Whether BullMQ keeps a job it finishes under the job's `removeOnComplete` or
 * `removeOnFail`: not when it is `true`, `0`, `{ count: 0 }` or `{ age: 0 or
 * less }` unless with `limit: 0` (a count or an age above 0 keeps it a
 * while). The one place the rule lives: the processor reads it of the job's
 * own option, else of its Worker's (as BullMQ applies them), for the `FAIL`
 * script, which records a failed job BullMQ keeps.
 */
export function keptWhenFinished(remove: unknown): boolean {
  if (remove === true || remove === 0) return false;
  if (typeof remove !== 'object' || remove === null) return true;
  const { count, age, limit } = remove as { count?: unknown; age?: unknown; limit?: unknown };
  // BullMQ's script reads the age as a number (a numeric string too), and removes at most `limit` jobs (0: none)
  const maxAge = typeof age === 'number' || (typeof age === 'string' && age.trim() !== '') ? Number(age) : NaN;
  return count !== 0 && !(maxAge <= 0 && limit !== 0);
}

/** The job id of a licence member: its mark (`!` a fresh chain, `?` failed for good) dropped. */
export function jobIdOfLicence(licence: string): string {
  return /[!?]$/.test(licence) ? licence.slice(0, -1) : licence;
}

/** Whether `jobId` is a wake-up the engine added for stage `sid` (not a job re-added by hand). */
export function isWakeUpId(sid: string, jobId: string): boolean {
  // Stryker disable next-line ConditionalExpression,EqualityOperator: equivalent: `jobId[sid.length] === '@'` already needs jobId longer than sid
  return jobId.length > sid.length && jobId[sid.length] === '@' && jobId.startsWith(sid) && WAKE_UP_SUFFIX.test(jobId);
}

export interface Licence {
  cls: OutcomeClass;
  chain: ChainState;
  /** Epoch ms at which the window ends. */
  until: number;
  /** Cleared by the user, or retried by hand after a terminal failure: the chain starts fresh. */
  fresh: boolean;
  /** Its job failed for good: nothing of the stage is pending. */
  failed: boolean;
}

/** What a licence (a wake-up id, maybe ending in `!`) encodes; `null` if it is not one. */
export function parseLicence(licence: string): Licence | null {
  const m = WAKE_UP_SUFFIX.exec(licence);
  if (!m) return null;
  const failed = licence.endsWith('?');
  const fresh = failed || licence.endsWith('!');
  const chain = fresh ? FRESH_CHAIN : { capacity: Number(m[2]), idempotent: Number(m[3]), failures: Number(m[4]) };
  return {
    cls: m[1] === 'cap' ? 'capacity' : 'idempotent',
    chain,
    until: parseInt((m[5] as string).slice(0, -RAND), 36),
    fresh,
    failed,
  };
}

export function refOf(data: DispatchJobData): StageRef {
  return { scope: data.scope, stage: data.stage };
}
