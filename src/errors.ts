import type { StageRef } from './types';

/** Stable error codes; branch on `error.code`, never on the message. */
export type StageDeferralErrorCode =
  | 'INVALID_STAGE_REF'
  | 'INVALID_OPTIONS'
  | 'INVALID_JOB_DATA'
  | 'INVALID_JOB_OPTIONS'
  | 'INVALID_EXECUTOR_RESULT'
  | 'DISPATCH_FAILED'
  | 'DEFERRAL_LIMIT'
  | 'ENGINE_CLOSED'
  | 'REPLICATION_UNCONFIRMED'
  | 'INVALID_PAYLOAD'
  | 'CLEAR_INCOMPLETE'
  | 'MISSING_PERMISSION'
  | 'NO_EXECUTOR'
  | 'UNSUPPORTED_BULLMQ'
  | 'UNSUPPORTED_CONNECTION'
  | 'INVALID_RESOURCE';

/** Base class of every error this library throws. */
export class StageDeferralError extends Error {
  readonly code: StageDeferralErrorCode;

  constructor(code: StageDeferralErrorCode, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A `StageRef` that cannot be encoded: empty, too deep, too long, not a string. */
export class InvalidStageRefError extends StageDeferralError {
  constructor(message: string) {
    super('INVALID_STAGE_REF', message);
  }
}

/** Engine options that fail validation (e.g. a window out of range). */
export class InvalidOptionsError extends StageDeferralError {
  constructor(message: string) {
    super('INVALID_OPTIONS', message);
  }
}

/**
 * A resource name that cannot gate anything (empty, not a string, too long) or a `capacityLeft`
 * that is not a count, from `resourceOf`, `noCapacity`, `CapacityError`, `dispatched` or an
 * executor's answer. Thrown before anything is written.
 */
export class InvalidResourceError extends StageDeferralError {
  constructor(message: string) {
    super('INVALID_RESOURCE', message);
  }
}

/** A dispatch job whose data is not what this library wrote. Unrecoverable. */
export class InvalidJobDataError extends StageDeferralError {
  readonly jobId: string | undefined;

  constructor(message: string, jobId?: string) {
    super('INVALID_JOB_DATA', message);
    this.jobId = jobId;
  }
}

/**
 * A dispatch job written in a wire format version (`data.v`) this worker does
 * not read: a producer newer than the worker. Unrecoverable; the job stays
 * failed, to be retried by hand once the workers are upgraded (docs/producers.md,
 * "Versioning"). Its `code` is `INVALID_JOB_DATA`, as for any data this
 * library cannot read.
 */
export class UnsupportedJobVersionError extends InvalidJobDataError {
  constructor(
    readonly version: number,
    jobId?: string,
  ) {
    super(
      `Dispatch job ${jobId ?? '?'} is in wire format v${version}; this worker reads v1 only. ` +
        'Upgrade the workers before the producers, then retry the job (docs/producers.md, "Versioning")',
      jobId,
    );
  }
}

/**
 * A dispatch job whose id or options break the producer contract
 * (docs/producers.md, "Job options"): an id `<stageId>@…` whose stage id is not
 * the one its data encodes to (a producer's stage-id encoder differs from this
 * library's), or an enqueue id `<stageId>@r.…` added without deduplication id
 * `<stageId>`, with a deduplication `ttl`/`extend`/`replace`, or with retry
 * options the engine cannot apply, or a wake-up id without wake-up data (a
 * producer copying the engine's id shape). Unrecoverable:
 * the job fails with it, nothing is dispatched.
 */
export class InvalidJobOptionsError extends StageDeferralError {
  constructor(
    message: string,
    readonly jobId: string,
  ) {
    super('INVALID_JOB_OPTIONS', message);
  }
}

/** A payload that cannot be stored as a job's JSON data (a BigInt, a cycle, a function). Nothing was called or written. */
export class InvalidPayloadError extends StageDeferralError {
  constructor(message: string) {
    super('INVALID_PAYLOAD', message);
  }
}

/** The executor resolved with something that is not an `ExecutorResult`. */
export class InvalidExecutorResultError extends StageDeferralError {
  constructor(message: string) {
    super('INVALID_EXECUTOR_RESULT', message);
  }
}

/**
 * Thrown by the processor for a non-deferrable outcome, so BullMQ's attempts
 * and backoff apply. `reason` is the outcome the executor reported.
 */
export class DispatchFailedError extends StageDeferralError {
  readonly ref: StageRef;
  readonly reason: string;

  constructor(ref: StageRef, reason: string, deferrable?: string) {
    super(
      'DISPATCH_FAILED',
      `Dispatch of ${describeRef(ref)} sent nothing: ${reason} (not deferrable` +
        (deferrable === undefined
          ? ')'
          : `; the deferrable reasons are ${deferrable}: add yours with the engine's \`outcomes\` option, or throw CapacityError)`),
    );
    this.ref = ref;
    this.reason = reason;
  }
}

/**
 * A stage was deferred for capacity more times in a row than allowed.
 * The job fails with it (no further retries); retry it by hand from Bull Board.
 */
export class DeferralLimitError extends StageDeferralError {
  readonly ref: StageRef;
  readonly reason: string;
  readonly deferrals: number;

  /** `deferrals`: capacity deferrals in a row the stage had when it reached the limit. */
  constructor(ref: StageRef, reason: string, deferrals: number) {
    super(
      'DEFERRAL_LIMIT',
      `Stage ${describeRef(ref)} was deferred ${deferrals} times in a row for capacity and answered ${reason} again; ` +
        'giving up (limits.maxCapacityDeferrals; retry the job by hand)',
    );
    this.ref = ref;
    this.reason = reason;
    this.deferrals = deferrals;
  }
}

/** A method was called after `close()`. */
export class EngineClosedError extends StageDeferralError {
  /** `cause`: what a call the close cut off failed with (its connection closed under it). */
  constructor(cause?: unknown) {
    super('ENGINE_CLOSED', 'The dispatch engine is closed');
    if (cause !== undefined) (this as Error & { cause?: unknown }).cause = cause;
  }
}

/**
 * A write was made, but the `WAIT` that was to confirm its replication ran on
 * another connection (ioredis resent it after the first one closed, e.g. in a
 * failover), or failed (`cause`): whether the replicas hold the write is unknown. A dispatch job
 * throws it and is retried; the retry finds the stage deferred if the write
 * survived, or dispatches it again if not.
 */
export class ReplicationUnconfirmedError extends StageDeferralError {
  /** `cause`: what failed after the write ran (its `WAIT`, or the read of its connection), if that. */
  constructor(
    op: string,
    override readonly cause?: unknown,
  ) {
    super(
      'REPLICATION_UNCONFIRMED',
      cause === undefined
        ? `The ${op} was written, but its connection closed before the replicas confirmed it; it may be lost in a failover`
        : `The ${op} was written, but the replicas did not confirm it (${String((cause as Error)?.message ?? cause)}); it may be lost in a failover`,
    );
  }
}

/**
 * Marks an error of this library as terminal for BullMQ, which does not retry
 * an error named `UnrecoverableError`: the failed job keeps the library's
 * error (its class, `code` and context), so `instanceof DeferralLimitError`
 * and `isStageDeferralError` hold in `worker.on('failed')`.
 */
export function asTerminal<E extends StageDeferralError>(error: E): E {
  Object.defineProperty(error, 'name', { value: 'UnrecoverableError', configurable: true, writable: true });
  return error;
}

/**
 * `clearDeferrals` ended `cleared` deferrals in its first batches of 500, then
 * a batch's call failed (`cause`: Redis unreachable, a slot migrating, a
 * replica wait unconfirmed): that batch may have ended its deferrals (their
 * wake-ups then run at their time) or not; the batches after it were not
 * tried. Clear again to end what is left.
 */
export class ClearIncompleteError extends StageDeferralError {
  constructor(
    readonly cleared: number,
    override readonly cause: unknown,
  ) {
    super(
      'CLEAR_INCOMPLETE',
      `Cleared ${cleared} deferrals, then a batch failed; what is left stays deferred (clear again): ${String((cause as Error)?.message ?? cause)}`,
    );
  }
}

/**
 * The Redis user of the engine's connection may not run commands the engine
 * needs, or may not write the queue's keys (a Redis ACL). Found at start-up,
 * before anything is written; every operation of the engine rejects with it.
 * `commands`: the missing ones; `keys`: the key pattern to grant, when the
 * user may not write the queue's keys.
 */
export class MissingPermissionError extends StageDeferralError {
  constructor(
    readonly commands: string[],
    readonly keys?: string,
  ) {
    const denied = [
      ...(commands.length > 0 ? [`run ${commands.map((c) => `\`${c}\``).join(', ')}`] : []),
      ...(keys === undefined ? [] : [`write the queue's keys (\`${keys}\`)`]),
    ];
    const grant = [...commands.map((c) => `+${c.replace(' ', '|')}`), ...(keys === undefined ? [] : [`~${keys}`])];
    super(
      'MISSING_PERMISSION',
      `The Redis user may not ${denied.join(', nor ')}, which the engine needs: ` +
        `grant ${grant.join(' ')} (see docs/reliability.md, "Least privilege")`,
    );
  }
}

/**
 * `dispatchStage`, `processor` or `createWorker` on an engine created without
 * an `executor`: it is producer-only (enqueue, cancel, clear, list, wake).
 * Nothing was called or written. `method`: what was called.
 */
export class NoExecutorError extends StageDeferralError {
  constructor(readonly method: 'dispatchStage' | 'processor' | 'createWorker') {
    super(
      'NO_EXECUTOR',
      `This engine has no executor: it is producer-only, so \`${method}\` cannot run here. ` +
        'Pass `executor` to createDispatchEngine in the process that dispatches stages (your workers).',
    );
  }
}

/**
 * The installed `bullmq` is a version this library does not support (a peer
 * dependency: the app's own copy is used). Thrown by `createDispatchEngine`
 * before anything is written. `version`: the installed one (`undefined` when it
 * could not be read); `supported`: the range that is.
 */
export class UnsupportedBullMQError extends StageDeferralError {
  constructor(
    readonly version: string | undefined,
    readonly supported: string,
  ) {
    super(
      'UNSUPPORTED_BULLMQ',
      `bullmq ${version ?? '(version unknown)'} is not supported: bullmq-stage-deferral needs bullmq ${supported} ` +
        `(install one, e.g. \`npm install bullmq@6\`)`,
    );
  }
}

/**
 * The connection (or BullMQ's backend) is not Redis through ioredis: the engine
 * runs its own Lua scripts and MULTIs on an ioredis client or Cluster, which
 * BullMQ's other drivers (node-redis, Bun's client, Valkey GLIDE) and its
 * PostgreSQL backend do not provide. Thrown by `createDispatchEngine` before
 * anything is written. `kind`: what was passed. Also an ioredis connection
 * with `keyPrefix` (BullMQ's keys and the engine's would split between two
 * prefixes): use the engine's `prefix` option instead.
 */
export class UnsupportedConnectionError extends StageDeferralError {
  constructor(
    readonly kind: string,
    advice = 'bullmq-stage-deferral needs Redis through ioredis: pass an ioredis `Redis` or `Cluster` instance, ' +
      'or ioredis connection options, and the default (Redis) BullMQ backend',
  ) {
    super('UNSUPPORTED_CONNECTION', `The connection is ${kind}; ${advice}`);
  }
}

/** Type guard: any error raised by this library. */
export function isStageDeferralError(value: unknown): value is StageDeferralError {
  return value instanceof StageDeferralError;
}

export function describeRef(ref: StageRef): string {
  return `${JSON.stringify(ref.scope)}/${JSON.stringify(ref.stage)}`;
}
