import type { KnownReason } from './outcomes';

/**
 * Glossary (used the same way everywhere in this package):
 *
 * - stage: one unit of dispatch, `{ scope, stage }`.
 * - scope: the owner path from outermost to innermost (book, chapter, scene).
 * - executor: the host's function that tries to send a stage's jobs downstream.
 * - outcome: the reason a dispatch sent nothing (`no_worker_available`, ...).
 * - capacity: an outcome that means "nothing can take it now".
 * - idempotent: an outcome that means "already done"; it must not spin either.
 * - deferral: a stage whose outcome was deferrable, parked for a window.
 * - window: how long a deferral lasts; while it is open, dispatching the stage
 *   has no side effect at all.
 * - marker: the Redis key whose existence is the deferral (TTL = window).
 * - wake-up: the delayed BullMQ job that dispatches the stage again when the
 *   window ends.
 */

/** One unit of dispatch. */
export interface StageRef {
  /** Owner path, outermost first: 1 to 8 non-empty segments, any Unicode. */
  scope: readonly string[];
  /** The stage kind, e.g. `image` or `video`. Non-empty, any Unicode. */
  stage: string;
}

/**
 * What the host's executor returns for one dispatch attempt (or use `noCapacity()`, `alreadyDone()`, `dispatched()`).
 * `R`: the reasons of your own (the engine's `outcomes`), beside the built-in ones.
 */
export interface ExecutorResult<R extends string = never> {
  dispatched: boolean;
  /** Jobs sent downstream, when known (optional). */
  jobs?: number;
  /**
   * Why nothing was sent (`null` when dispatched): a built-in reason or one of
   * the engine's `outcomes` (`createDispatchEngine` types it so: a typo does not
   * compile). A reason that is not deferrable is a failure (BullMQ's `attempts` apply).
   */
  reason: KnownReason | R | null;
  retryable?: boolean;
  /** Counts of not-sent reasons of this attempt; the dominant one is reported. */
  notSent?: Map<string, number>;
  /**
   * The downstream's own hint of when to ask again, ms (an HTTP 429/503
   * `Retry-After`, a pool's ETA). For a capacity outcome the window is this,
   * clamped to [50 ms, `windows.capacityMaxSeconds`] and lengthened (never
   * shortened) by up to `windows.jitter`; it spends no attempt. Ignored for
   * other outcomes. Negative, NaN or not a number: `InvalidExecutorResultError`.
   */
  retryAfterMs?: number;
  /**
   * A capacity outcome: the resource that is full (its gate closes for this answer's window;
   * see the engine's `resourceOf`). 1..200 characters; anything else: `InvalidExecutorResultError`.
   */
  resource?: string;
  /**
   * A dispatch: the free slots of the stage's resource after this one, when the downstream
   * says; that many stages of its line wake (without it, 2: a slow start). A count (an integer
   * >= 0); anything else is reported (`resultInvalid`) and ignored.
   */
  capacityLeft?: number;
}

export type OutcomeClass = 'capacity' | 'idempotent';

/** Context handed to the executor, `rollback` and `journal`. */
export interface DispatchContext {
  buildId: string | undefined;
  force: boolean;
  /**
   * Aborted when the engine closes, the dispatch lock is lost, or the stage is
   * cancelled (`cancelActiveDispatch`) while the executor runs.
   */
  signal: AbortSignal;
  /**
   * Strictly increasing per stage across every engine on the queue (a Redis
   * counter taken with the lock). No lock can stop a paused process that
   * resumes after its lock expired; pass this to the downstream and let it
   * reject a dispatch older than one it has already seen.
   */
  fencingToken: number;
}

export type Executor<P = unknown, R extends string = never> = (
  ref: StageRef,
  payload: P,
  ctx: DispatchContext,
) => Promise<ExecutorResult<R>>;

/** Journal events: one per deferral, from the attempt that created it. */
export interface DeferralJournalEvent {
  type: 'stage_deferred';
  reason: string;
  class: OutcomeClass;
  /** Epoch ms at which the window ends. */
  until: number;
  /** Deferrals of this class in a row, this one included. */
  deferrals: number;
  wakeUpJobId: string;
}

export interface DispatchResult {
  dispatched: boolean;
  reason: string | null;
  retryable: boolean;
  /** Present and true when the call was suppressed by an open deferral. */
  deferred?: boolean;
  /** Epoch ms at which the deferral ends (suppressed calls, and new deferrals). */
  until?: number;
  /** The executor's result (with `retryable: true` for a deferrable outcome). */
  result?: ExecutorResult<string>;
  /**
   * True when a cancel arrived while this dispatch was in flight.
   */
  cancelled?: boolean;
  /** True when the idempotent deferral limit ended the stage as already done. */
  completed?: boolean;
  /** True when the capacity deferral limit was reached: a terminal failure. */
  limitReached?: boolean;
  /**
   * True when the executor dispatched, but the attempt's lock had expired
   * meanwhile (a pause longer than `lockMs`; for a job, also BullMQ's lock of
   * the job lost): the success did not end the stage's chain, and a deferral
   * another attempt recorded since stands.
   */
  lockLost?: boolean;
  /** True when the deferral was recorded but the `journal` hook threw (the deferral stands; see the `hookFailed` event). */
  journalFailed?: boolean;
}

export interface DeferredStage {
  ref: StageRef;
  reason: string;
  class: OutcomeClass;
  /** Epoch ms. */
  until: number;
  /** Deferrals of this class in a row. */
  deferrals: number;
  wakeUpJobId: string;
  /** The resource whose line the stage waits in, when it has one. */
  resource?: string;
}

/** One resource's gate and line, as `listGates` (and the CLI's `gates`) read them. */
export interface GateState {
  resource: string;
  /** `open` (no gate key), `closed` (until the window ends), `probing` (one probe in flight until its lease ends). */
  gate: 'open' | 'closed' | 'probing';
  /** Redis' time the window or the probe's lease ends, epoch ms; null when open. A `closed` gate past it is due: the next dispatch probes. */
  until: number | null;
  /** Stages in its line: waiting, or woken and not yet done (as the `resource.waiting` gauge counts them). */
  waiting: number;
}

/** One page of `listDeferred(scope, { limit, cursor })`. */
export interface DeferredPage {
  stages: DeferredStage[];
  /** Pass it back as `cursor` for the next page; null when the listing is complete. */
  nextCursor: string | null;
}

export interface EnqueueResult {
  /** True when a new dispatch job was added. */
  added: boolean;
  /** Why nothing was added: `deferred`, `dispatch_in_flight`, `pending`. */
  reason: 'deferred' | 'dispatch_in_flight' | 'pending' | null;
  /** The stage's job id (the new one, or the one already pending). */
  jobId?: string;
  until?: number;
  /**
   * Whether this call's payload will reach the executor: true for a job added,
   * and with `replace: true` for a deferred or pending stage whose job had not
   * begun (its payload replaced); false otherwise (the earlier payload stands).
   */
  payloadTaken: boolean;
}
