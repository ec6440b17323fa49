import { checkCapacityLeft, checkResource } from './resource';
import type { ExecutorResult, OutcomeClass } from './types';

/** Outcomes meaning "nothing can take this stage now". Order breaks ties. */
export const CAPACITY_OUTCOMES = ['no_worker_available', 'duplicate_pending', 'ambiguous_post', 'no_capacity'] as const;
/** Outcomes meaning "the logical task is already done". */
export const IDEMPOTENT_OUTCOMES = ['already_completed'] as const;
/** Documented outcomes that are not deferrable: the job fails and BullMQ's attempts apply. */
export const FAILURE_OUTCOMES = [
  'no_jobs_sent',
  'no_jobs_generated',
  'send_failed',
  'already_ready',
  'circuit_open',
] as const;

/** A reason the engine knows without configuration. */
export type KnownReason =
  (typeof CAPACITY_OUTCOMES)[number] | (typeof IDEMPOTENT_OUTCOMES)[number] | (typeof FAILURE_OUTCOMES)[number];

/** Reasons of your own that defer (the engine's `outcomes` option), added after the built-in ones. */
export interface OutcomeOptions<R extends string = string> {
  capacity?: readonly R[];
  idempotent?: readonly R[];
}

/**
 * An engine's outcome lists: the built-in ones, then its own (`outcomes`), in
 * that order, which breaks ties between equal `notSent` counts.
 */
export class OutcomeTable {
  readonly capacity: readonly string[];
  readonly idempotent: readonly string[];

  constructor(own: OutcomeOptions = {}) {
    this.capacity = [...CAPACITY_OUTCOMES, ...(own.capacity ?? [])];
    this.idempotent = [...IDEMPOTENT_OUTCOMES, ...(own.idempotent ?? [])];
  }

  /** The class of a deferrable reason, `null` for any other. */
  classOf(reason: string | null | undefined): OutcomeClass | null {
    if (this.capacity.includes(reason as string)) return 'capacity';
    if (this.idempotent.includes(reason as string)) return 'idempotent';
    return null;
  }

  /**
   * The dominant not-sent reason of one attempt: the one with the highest
   * count when every reason with a positive count is deferrable; `null` when
   * any is not (a real failure wins) or none has a positive count. Ties go to
   * the reason listed first (capacity, then idempotent).
   */
  dominant(notSent: ReadonlyMap<string, number>): string | null {
    const order = [...this.capacity, ...this.idempotent];
    let best: string | null = null;
    let bestCount = 0;
    for (const [reason, count] of notSent) {
      if (!(count > 0)) continue;
      if (this.classOf(reason) === null) return null;
      // Stryker disable next-line ConditionalExpression,EqualityOperator: equivalent: best is null only while bestCount is 0, which no positive count equals; two distinct reasons never share an index of `order`, so `<` and `<=` agree
      if (count > bestCount || (count === bestCount && best !== null && order.indexOf(reason) < order.indexOf(best))) {
        best = reason;
        bestCount = count;
      }
    }
    return best;
  }

  /** The deferrable reasons, as an error message lists them. */
  describe(): string {
    return `capacity: ${this.capacity.join(', ')}; idempotent: ${this.idempotent.join(', ')}`;
  }
}

/** Reasons the engine answers itself: never a host's own outcome. */
export const ENGINE_REASONS = [
  'executor_error',
  'rollback_error',
  'rate_limited',
  'dispatch_in_flight',
  'deferred_capacity',
  'deferred_idempotent',
  'cancelled',
  'stale_wake_up',
  'superseded',
  'dispatch_lock_lost',
  'gate_closed',
] as const;

/** The built-in lists alone. */
export const BUILT_IN_OUTCOMES = new OutcomeTable();

/**
 * Thrown by an executor: nothing can take the stage now. The stage is
 * deferred for a capacity window (or `retryAfterMs`, clamped as an answer's
 * is), whatever `reason` says (default `no_capacity`); no attempt is spent.
 * Told by its name too, so a copy of the class from another bundle works.
 */
export class CapacityError extends Error {
  readonly reason: string;
  readonly retryAfterMs: number | undefined;
  /** The resource that is full (its gate closes); `InvalidResourceError` for an empty name. */
  readonly resource: string | undefined;

  constructor(options: { reason?: string; retryAfterMs?: number; resource?: string } = {}) {
    const reason = options.reason ?? 'no_capacity';
    const resource = options.resource === undefined ? undefined : checkResource(options.resource, 'CapacityError');
    super(`No capacity: ${reason}`);
    this.name = 'CapacityError';
    this.reason = reason;
    this.retryAfterMs = options.retryAfterMs;
    this.resource = resource;
  }
}

/**
 * The answer a thrown `CapacityError` stands for, or undefined for any other
 * throw. Told by `instanceof` (a subclass too) or by its name (a copy of the
 * class from another bundle or realm). A `retryAfterMs` that is not a number
 * >= 0 (a missing `Retry-After` header read as NaN) is no hint: the capacity
 * window applies; an empty or missing reason is `no_capacity`.
 */
export function capacityAnswer(error: unknown): ExecutorResult<string> | undefined {
  if (!(error instanceof CapacityError) && !isNamedCapacityError(error)) return undefined;
  const { reason, retryAfterMs, resource } = error as Partial<CapacityError>;
  const answer: ExecutorResult<string> = {
    dispatched: false,
    jobs: 0,
    reason: typeof reason === 'string' && reason !== '' ? reason : 'no_capacity',
  };
  if (typeof retryAfterMs === 'number' && retryAfterMs >= 0) answer.retryAfterMs = retryAfterMs;
  // (a copy of the class from another bundle checked nothing: the answer's check does)
  if (resource !== undefined) answer.resource = resource;
  return answer;
}

function isNamedCapacityError(error: unknown): boolean {
  // Stryker disable BlockStatement: equivalent: an empty catch returns undefined, which the one caller's `!` reads as false
  try {
    // Stryker disable next-line ConditionalExpression: equivalent: without `error !== null`, null's `.name` throws and the catch answers false all the same
    return typeof error === 'object' && error !== null && (error as { name?: unknown }).name === 'CapacityError';
  } catch {
    return false;
  }
}
// Stryker restore BlockStatement

/**
 * An answer: nothing could take the stage now (capacity; `retryAfterMs` if the downstream said
 * when; `resource` when a whole resource is full: its gate closes). `InvalidResourceError` for an
 * empty resource name.
 */
export function noCapacity<const R extends string = never>(
  options: { retryAfterMs?: number; reason?: KnownReason | R; resource?: string } = {},
): ExecutorResult<R> {
  const answer: ExecutorResult<R> = { dispatched: false, jobs: 0, reason: options.reason ?? 'no_capacity' };
  if (options.retryAfterMs !== undefined) answer.retryAfterMs = options.retryAfterMs;
  if (options.resource !== undefined) answer.resource = checkResource(options.resource, 'noCapacity');
  return answer;
}

/** An answer: the work is already done downstream (idempotent). */
export function alreadyDone(): ExecutorResult<never> {
  return { dispatched: false, jobs: 0, reason: 'already_completed' };
}

/**
 * An answer: the stage was sent (`jobs`, when known, how many jobs went downstream;
 * `capacityLeft`, when known, the free slots of its resource after this one: that many stages of
 * its line wake). `InvalidResourceError` for a `capacityLeft` that is not a count.
 */
export function dispatched(jobs?: number, options: { capacityLeft?: number } = {}): ExecutorResult<never> {
  const answer: ExecutorResult<never> =
    jobs === undefined ? { dispatched: true, reason: null } : { dispatched: true, jobs, reason: null };
  if (options.capacityLeft !== undefined) answer.capacityLeft = checkCapacityLeft(options.capacityLeft, 'dispatched');
  return answer;
}

/**
 * Default capacity window, seconds. A scheduler ticking every 5 s sees 6 ticks
 * suppressed per window, and a freed GPU slot waits at most 30 s to be used.
 */
export const DEFERRED_STAGE_TTL_S = 30;
/**
 * Default idempotent window, seconds (10 x capacity): an "already done" answer
 * rarely changes, so re-asking often is pure churn.
 */
export const DEFERRED_IDEMPOTENT_TTL_S = 300;

export function isCapacityOutcome(reason: string | null | undefined): boolean {
  return BUILT_IN_OUTCOMES.classOf(reason) === 'capacity';
}

export function isIdempotentOutcome(reason: string | null | undefined): boolean {
  return BUILT_IN_OUTCOMES.classOf(reason) === 'idempotent';
}

export function isDeferrableOutcome(reason: string | null | undefined): boolean {
  return isCapacityOutcome(reason) || isIdempotentOutcome(reason);
}

/** The class of a deferrable outcome (built-in lists), `null` for any other reason. */
export function outcomeClass(reason: string | null | undefined): OutcomeClass | null {
  return BUILT_IN_OUTCOMES.classOf(reason);
}

/** Default window in seconds for a deferrable outcome, `null` otherwise. */
export function deferralWindowFor(reason: string): number | null {
  const cls = outcomeClass(reason);
  if (cls === 'capacity') return DEFERRED_STAGE_TTL_S;
  if (cls === 'idempotent') return DEFERRED_IDEMPOTENT_TTL_S;
  return null;
}

/** The dominant not-sent reason of one attempt, by the built-in lists (see `OutcomeTable.dominant`). */
export function classifyNotSentReasons(notSent: ReadonlyMap<string, number>): string | null {
  return BUILT_IN_OUTCOMES.dominant(notSent);
}
