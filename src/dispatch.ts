import { setTimeout as sleep } from 'node:timers/promises';
import { Job, type Queue } from 'bullmq';
import { checkExecutorResult, reportedReason } from './answer';
import type { BeginOutcome, DeferralStore } from './deferral-store';
import type { EngineEmitter } from './events';
import { EngineClosedError, type InvalidExecutorResultError } from './errors';
import { dispatchJobData, FRESH_CHAIN, jobIdOfLicence, parseLicence, wakeUpJobId, type ChainState } from './job-data';
import type { ResolvedOptions } from './options';
import { parseStageId } from './stage-ref';
import { capacityAnswer, OutcomeTable } from './outcomes';
import { capacityCount, checkResource, encodeResource, MAX_WAKE } from './resource';
import { settlesWithin } from './store/within';
import { windowFor } from './windows';
import type { DispatchContext, DispatchResult, ExecutorResult, OutcomeClass, StageRef } from './types';

/** How one dispatch attempt ended, for the processor; `result` is what `dispatchStage` returns. */
export interface Attempt {
  kind:
    | 'dispatched'
    | 'suppressed'
    | 'in_flight'
    | 'lost'
    | 'gone'
    | 'early'
    | 'stale'
    | 'superseded'
    | 'deferred'
    | 'done'
    | 'cancelled'
    | 'interrupted'
    | 'failed'
    | 'rate_limited'
    | 'limit';
  result: DispatchResult;
  /** The chain the attempt ran in (after it, for `deferred` and `limit`): failures of earlier jobs included. */
  chain: ChainState;
  /** Real failures the running job has spent in its chain (not counting this attempt). */
  ownFailures: number;
  /** What the executor (or rollback) threw. */
  error?: unknown;
  /** For `early`: ms until the wake-up's window ends by Redis' clock. */
  waitMs?: number;
  /** For `failed`: the real failures of the chain, this one included (what the job's budget has spent). */
  spent?: number;
}

/** The job being processed, when the attempt comes from the worker. */
export interface JobContext {
  id: string;
  /** A wake-up the engine added (its id names the stage and the deferral), not one re-added by hand. */
  isWakeUp: boolean;
  /** The job's own retry options (recorded when it was added); a wake-up it adds keeps them. */
  attempts: number;
  backoff: ResolvedOptions['retry']['backoff'];
  /** The worker's BullMQ lock token of the job: a worker that no longer holds the job begins nothing. */
  bullToken?: string;
  /**
   * BullMQ's stalled count of the job as it handed this run over: a success's
   * release tells by it whether BullMQ has since handed the job on (see
   * `handedOn` in `batch.lua`). None from a BullMQ without it.
   */
  stalled?: number;
  /**
   * Whether a real failure, the `spent`-th of the job's chain, ends the job for
   * good (its budget, an unrecoverable error, BullMQ's `maxStartedAttempts`):
   * the processor decides by the same rule after the attempt.
   */
  failsForGood?: (spent: number, error: unknown) => boolean;
  /** The resource a wake-up's data names (its stage waits in that resource's line). */
  resource?: string;
}

/** The retry options a job was added with: what a wake-up it leads to keeps. */
type RetryBudget = Pick<JobContext, 'attempts' | 'backoff'>;

/** Why an attempt's signal was aborted (close() aborts with an `EngineClosedError`). */
class AbortedBy extends Error {
  constructor(readonly by: 'cancel' | 'lock_lost') {
    super(by === 'cancel' ? 'Dispatch cancelled' : 'Dispatch lock lost');
    this.name = 'AbortError';
  }
}

/** What an attempt carries from its begin to its deferral. */
interface Carry {
  /** The retry options the wake-up keeps: the job's own, or for a direct call the licensed job's. */
  budget: RetryBudget | undefined;
  /** The wake sequence seen at begin. */
  wakeSeq: string;
}

/** A begin that took the lock. */
type Locked = Extract<BeginOutcome, { kind: 'locked' }>;

/** How long close() waits for attempts' Redis work (a begin, a release, a deferral), ms (see `close`). */
const BEGIN_WAIT_MS = 2000;
/** How often close() looks whether an executor or rollback still runs, ms. */
const EXECUTING_POLL_MS = 100;
type Released = Awaited<ReturnType<DeferralStore['release']>>;

/** How long a dispatched attempt waits before it sends its release again (`releaseSent`), ms. */
const RELEASE_RETRY_MS = [100, 1000];

/** An error reply of Redis (ioredis' `ReplyError`): the command was refused, so it did not run. */
const isReplyError = (error: unknown) => (error as { name?: unknown } | null)?.name === 'ReplyError';

/**
 * An attempt holding a lock. Its executor's `AbortController` is made only
 * when the executor reads `ctx.signal` (most never do): an abort before that
 * is kept and handed to the signal when it is made.
 */
class Running {
  constructor(
    readonly ref: StageRef,
    readonly sid: string,
    readonly token: string,
    /** The job being processed; none for a direct call. */
    readonly job: JobContext | undefined,
    /** The chain the attempt runs in. */
    readonly chain: ChainState,
    /** Real failures the running job has spent in its chain. */
    readonly ownFailures: number,
    /** The stage had no licence and no failed-job record when the attempt began. */
    readonly heldNothing: boolean,
    /** The resource the stage needs (`resourceOf`, or its wake-up's data), if any. */
    readonly resource: string | undefined,
  ) {}

  private controller: AbortController | undefined;
  private reason: Error | undefined;
  /** Aborts count from the lock taken until the rollback ended (`shut`): not while the outcome is recorded. */
  private listening = true;

  shut(): void {
    this.listening = false;
  }

  /** Whether its executor or rollback still runs (until `shut`): what remains after is Redis' work. */
  get busy(): boolean {
    return this.listening;
  }

  abort(reason: Error): void {
    if (!this.listening) return;
    // the first reason stands (a cancel then a close() still records the cancelled deferral)
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.controller?.abort(reason);
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason !== undefined) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** What aborted the attempt: 'close', 'cancel', 'lock_lost', or undefined while nothing did. */
  get abortedBy(): 'close' | 'cancel' | 'lock_lost' | undefined {
    const r = this.reason;
    if (r === undefined) return undefined;
    return r instanceof EngineClosedError ? 'close' : (r as AbortedBy).by;
  }
}

/**
 * One dispatch attempt of one stage: the contract of `dispatchStage`.
 * begin (1 round trip) -> executor -> rollback -> defer (1 MULTI) or release.
 */
export class Dispatcher<P> {
  constructor(
    private readonly opts: ResolvedOptions<P>,
    private readonly store: DeferralStore,
    private readonly queue: Queue,
    private readonly events: EngineEmitter,
  ) {
    this.ticker = setInterval(() => this.renewLocks(), Math.floor(opts.lockMs / 3));
    this.ticker.unref();
    this.outcomes = new OutcomeTable(opts.outcomes);
  }

  /** The engine's outcome lists: the built-in ones and its `outcomes` option. */
  readonly outcomes: OutcomeTable;

  /** Attempts holding a lock: renewed while they run, aborted on close or cancel. */
  private readonly running = new Set<Running>();
  /** How many attempts have not finished yet (begun or not); `close()` waits for none to be left. */
  private pending = 0;
  /** Resolves `idle` when `pending` drops to 0 (made by `close()` only). */
  private drained: (() => void) | undefined;
  private idle: Promise<void> | undefined;
  private readonly ticker: NodeJS.Timeout;
  private closing = false;

  /** True once `close()` began: no new attempt starts. */
  get closed(): boolean {
    return this.closing;
  }

  /**
   * Stops new attempts, aborts the running executors' signals, and waits for
   * every attempt to end, renewing their locks meanwhile; then stops the renewals.
   */
  async close(): Promise<void> {
    this.closing = true;
    for (const r of this.running) r.abort(new EngineClosedError());
    if (this.pending > 0) {
      const idle = (this.idle ??= new Promise<void>((resolve) => (this.drained = resolve)));
      // an attempt whose executor or rollback still runs is waited for (its executor may send the
      // stage: its outcome must be recorded); what is left then, the attempts' begins, releases and
      // deferrals (a Redis that stopped answering may never reply), only for a while more: each
      // ends with EngineClosedError once its connection closes, its lock left to lapse as after a
      // crash (a stage it sent stays sent: `releaseSent`)
      // (polled while an executor runs, so the 2 s count from when the last one ended)
      let settled = false;
      while (!settled && this.executing()) settled = await settlesWithin(idle, EXECUTING_POLL_MS);
      // (at once when the loop saw it settle)
      await settlesWithin(idle, BEGIN_WAIT_MS);
    }
    clearInterval(this.ticker);
  }

  /** Whether an attempt's executor or rollback still runs. */
  private executing(): boolean {
    for (const r of this.running) if (r.busy) return true;
    return false;
  }

  /** Aborts the signal of this engine's running attempt of stage `sid` (a cancel), if any. */
  abortStage(sid: string): void {
    for (const r of this.running) if (r.sid === sid) r.abort(new AbortedBy('cancel'));
  }

  attempt(ref: StageRef, sid: string, payload: P, call: { buildId?: string; force?: boolean }, job?: JobContext) {
    // Stryker disable next-line ConditionalExpression: equivalent, a second line: both callers check `closed` synchronously before this call (the engine's open(), the processor's first line)
    if (this.closing) return Promise.reject(new EngineClosedError());
    return this.run(ref, sid, payload, call, job);
  }

  private async run(
    ref: StageRef,
    sid: string,
    payload: P,
    call: { buildId?: string; force?: boolean },
    job?: JobContext,
  ): Promise<Attempt> {
    // counted at once (an async function runs to its first await synchronously): close() waits for it
    this.pending++;
    try {
      const { store, opts } = this;
      // the stage's resource, checked before anything is written
      const resource = this.resourceOf(ref, payload, job);
      let begun: BeginOutcome;
      try {
        begun = await store.begin({
          resource: resource === undefined ? '' : encodeResource(resource),
          sid,
          ownJobId: job?.id ?? '',
          lockMs: opts.lockMs,
          wakeUp: job?.isWakeUp ?? false,
          skewToleranceMs: opts.maxClockSkewMs,
          bullToken: job?.bullToken,
        });
      } catch (error) {
        // a begin the close cut off (close() stopped waiting for it and closed its connection)
        throw this.closing ? new EngineClosedError(error) : error;
      }
      if (begun.kind !== 'locked') return this.notBegun(ref, begun);
      // reported before anything else can end the attempt: the begin recorded it as reported
      this.reportWake(ref, job, begun);
      if (this.closing) {
        // close() began while the begin was under way (and may no longer wait for this attempt):
        // nothing is sent now; the lock goes at once (a job is delayed, no attempt spent)
        // Stryker disable next-line StringLiteral: equivalent: `own` only names a job to the release, which ignores a job id that does not exist (and a direct call's release revokes nothing); every mode but 'end' and 'hold' is the plain release
        await store.release(sid, job?.id ?? '', begun.token, 'plain').catch(() => undefined);
        throw new EngineClosedError();
      }
      const running = new Running(
        ref,
        sid,
        begun.token,
        job,
        chainOf(begun),
        begun.ownFailures,
        begun.heldNothing,
        resource,
      );
      this.running.add(running);
      try {
        return await this.locked(running, payload, call, begun);
      } catch (error) {
        // nothing may leave the lock behind: release it (a no-op once a deferral took it)
        // Stryker disable next-line StringLiteral,ArrowFunction: equivalent: every mode but 'end' and 'hold' is the plain release, and the catch's value is dropped
        await store.release(sid, job?.id ?? '', begun.token, 'plain').catch(() => undefined);
        // a write the close cut off (it stopped waiting for it and closed its connection)
        throw this.closing && !running.busy && !(error instanceof EngineClosedError)
          ? new EngineClosedError(error)
          : error;
      } finally {
        this.running.delete(running);
      }
    } finally {
      if (--this.pending === 0) this.drained?.();
    }
  }

  /** The resource of an attempt: the engine's `resourceOf`, else the one its wake-up's data names. */
  private resourceOf(ref: StageRef, payload: P, job: JobContext | undefined): string | undefined {
    const own = this.opts.resourceOf;
    if (own) {
      const named = own(ref, payload);
      if (named !== undefined) return checkResource(named, 'resourceOf');
    }
    return job?.resource;
  }

  /**
   * A wake-up's run reports the wake it made (`woken`): its first run (a retry after a failure
   * does not report again) that ended its own deferral (an operator's Promote) or began once its
   * window ended (by Redis' clock, within `maxClockSkewMs`). A wake-up woken early by
   * `wakeDeferred` or a clear is reported by that call, in its own process.
   */
  private reportWake(ref: StageRef, job: JobContext | undefined, begun: Locked): void {
    if (!job?.isWakeUp || begun.ownFailures > 0) return;
    const until = parseLicence(job.id)?.until ?? 0;
    if (begun.endedOwnDeferral || this.store.redisNow() >= until - this.opts.maxClockSkewMs)
      this.events.emit('woken', { ref, jobId: job.id });
  }

  /** The answer of an attempt whose begin took no lock. */
  private notBegun(ref: StageRef, begun: Exclude<BeginOutcome, { kind: 'locked' }>): Attempt {
    switch (begun.kind) {
      case 'deferred': {
        const lic = parseLicence(begun.wakeUpJobId);
        const reason = lic?.cls === 'idempotent' ? 'deferred_idempotent' : 'deferred_capacity';
        // on Redis' clock, as the deferral's own `until` (its wake-up's id holds it)
        const until = lic?.until ?? this.store.redisNow();
        this.events.emit('suppressed', { ref, reason, until, via: 'dispatch' });
        return plain('suppressed', reason, true, { deferred: true, until });
      }
      case 'in_flight':
        return plain('in_flight', 'dispatch_in_flight', true);
      case 'cancelled':
        return plain('cancelled', 'cancelled', false, { cancelled: true });
      case 'stale':
        return plain('stale', 'stale_wake_up', false);
      case 'superseded':
        return plain('superseded', 'superseded', false);
      case 'gone':
        // its worker no longer holds the job (BullMQ's lock of it lapsed: it was, or will be,
        // redelivered): nothing began, nothing to undo
        // Stryker disable next-line StringLiteral,BooleanLiteral: equivalent: only a job's attempt is 'gone' (its worker no longer holds it, or its hash is gone or finished); the processor throws DelayedError for every 'gone' and reads nothing of the answer
        return plain('gone', 'dispatch_lock_lost', true);
      case 'early': {
        // Stryker disable next-line StringLiteral,BooleanLiteral,ObjectLiteral: equivalent: an early wake-up is only delayed again by waitMs (all the processor reads of it); no caller sees this result
        const early = plain('early', 'deferred_capacity', true, { deferred: true });
        return { ...early, waitMs: begun.remainingMs };
      }
    }
  }

  /**
   * The attempt holding the lock: the executor, then the dispatched answer. Kept
   * small (an async function's frame is as large as its body needs): the other
   * answers are `sent` (a release awaited), `unsent` and `notSent`.
   */
  private async locked(running: Running, payload: P, call: { buildId?: string; force?: boolean }, begun: Locked) {
    const { opts } = this;
    const { ref } = running;
    if (opts.faultHook) await opts.faultHook('lock-taken', ref);
    if (this.closing) running.abort(new EngineClosedError());
    // the resource's gate is closed: a deferral at once, no executor, no rollback (unless the gate
    // opened before it was recorded: then the attempt goes on)
    if (begun.gatedMs !== undefined) {
      const parked = await this.park(running, payload, call, begun);
      if (parked) return parked;
    }
    const ctx: DispatchContext = {
      buildId: call.buildId,
      force: call.force ?? false,
      get signal() {
        return running.signal;
      },
      fencingToken: begun.fencingToken,
    };
    let raw: ExecutorResult<string>;
    let invalid: InvalidExecutorResultError | undefined;
    // a thrown CapacityError defers as capacity, whatever its reason
    let thrownCapacity = false;
    const started = performance.now();
    try {
      const answer: unknown = await opts.executor(ref, payload, ctx);
      // (the check never throws for an answer that says dispatched: true: see checkExecutorResult)
      ({ raw, invalid } = checkExecutorResult(answer, this.outcomes));
    } catch (thrown) {
      // a CapacityError stands for a capacity answer (capacityAnswer keeps only a valid hint)
      const answer = capacityAnswer(thrown);
      if (!answer) {
        // BullMQ's manual rate limit (the executor called worker.rateLimit): no failure, no attempt spent
        const reason = isRateLimit(thrown) ? 'rate_limited' : 'executor_error';
        const result = { dispatched: false, reason, retryable: true };
        return this.unsent(running, reason, result, performance.now() - started, thrown);
      }
      raw = answer;
      thrownCapacity = true;
    }
    const executorMs = performance.now() - started;
    if (opts.faultHook) await opts.faultHook('executor-answered', ref);
    if (!raw.dispatched) return this.notSent(running, payload, call, ctx, raw, executorMs, begun, thrownCapacity);
    running.shut();
    // sent, whatever else the answer got wrong: reported, never retried (a retry would send it again)
    if (invalid) this.events.emit('resultInvalid', { ref, error: invalid });
    return this.sent(running, raw, executorMs);
  }

  /** A dispatched attempt whose release is awaited: it may revoke licences, or report a cancel or a lost lock. */
  private async sent(running: Running, raw: ExecutorResult<string>, executorMs: number): Promise<Attempt> {
    const { ref, job } = running;
    const released = await this.releaseSent(running, raw);
    await this.removeRevoked(released.revoked, job);
    if (released.line) this.lineWoken(running, released.line);
    if (this.opts.faultHook) await this.opts.faultHook('released', ref);
    this.events.emit('dispatched', { ref, jobs: raw.jobs, executorMs });
    const result: DispatchResult = { dispatched: true, reason: null, retryable: false, result: raw };
    // a cancel this engine saw (a renewal found it) stands even if a repeated release no longer does
    if (released.cancelled || running.abortedBy === 'cancel') result.cancelled = true;
    // sent, but by an attempt whose lock had expired: whatever another attempt recorded since stands
    if (released.lost) result.lockLost = true;
    return { kind: 'dispatched', chain: running.chain, ownFailures: running.ownFailures, result };
  }

  /**
   * The release of an attempt that sent its stage. It never throws: a job
   * whose attempt threw would be retried, and send the stage again. A release
   * whose reply is lost (a timeout, a reset connection, a failover) is sent
   * again, twice at most (`RELEASE_RETRY_MS`): a repeat is safe, as one that
   * finds the lock gone changes nothing (and, when a try before it may have
   * run, is not reported as `lockLost`: any error but an error reply of
   * Redis counts as "may have run", so a try that was never sent, e.g. with
   * ioredis' offline queue off, hides a lock really lost; READONLY or
   * LOADING in a failover do not). ioredis itself resends a command left
   * unanswered by a reconnect (`autoResendUnfulfilledCommands`, on by
   * default): a release resent so after it ran finds its lock gone and
   * answers lost, and the success says `lockLost: true` though nothing else
   * happened (a false alarm: the stage was sent once). If every try fails,
   * `releaseFailed` is emitted and the dispatch stands: the lock dies with the
   * job's BullMQ lock or after `lockMs`, and a licence the release would have
   * revoked is left (a licence whose job is gone is dropped by the next
   * enqueue; one whose job is still there, a wake-up or a job waiting out its
   * retry, may send the stage once more when it runs).
   */
  private async releaseSent(running: Running, raw: ExecutorResult<string>): Promise<Released> {
    // a success of a stage with a resource opens its gate and wakes its line: `capacityLeft`
    // stages, else 2 (each success doubles what is in flight: 1, 2, 4, …)
    const gate =
      running.resource === undefined
        ? undefined
        : {
            resource: encodeResource(running.resource),
            wake: this.lineWake(raw),
          };
    // whether the try before may have run: its reply, not Redis' refusal, went missing
    let mayHaveRun = false;
    for (let i = 0; ; i++) {
      try {
        const { sid, job, token } = running;
        const mode = running.heldNothing ? 'success' : 'end';
        // Stryker disable next-line StringLiteral: equivalent: `own` only names a job to the release, which ignores a job id that does not exist (and a direct call's release revokes nothing)
        const released = await this.store.release(sid, job?.id ?? '', token, mode, job?.stalled, gate);
        return mayHaveRun ? { ...released, lost: false } : released;
      } catch (error) {
        mayHaveRun ||= !isReplyError(error);
        // (closing: no try again, the close cuts its connection off; the lock lapses)
        if (i === RELEASE_RETRY_MS.length || this.closing) {
          this.events.emit('releaseFailed', { ref: running.ref, error });
          // Stryker disable next-line ArrayDeclaration: equivalent: a revoked id that names no job removes nothing
          return { cancelled: false, lost: false, revoked: [] };
        }
        await sleep(RELEASE_RETRY_MS[i]);
      }
    }
  }

  /**
   * An attempt that sent nothing ends here, released: cancelled (a cancel
   * marked the lock), lost (the lock expired: another attempt may hold the
   * stage; a job tries again later, spending nothing), interrupted (close()
   * aborted it: the job runs again on the next worker), or a real failure.
   */
  private async unsent(
    running: Running,
    reason: string,
    result: DispatchResult,
    executorMs: number,
    error?: unknown,
  ): Promise<Attempt> {
    const { ref, job, chain } = running;
    const base = { chain, ownFailures: running.ownFailures };
    running.shut();
    // a real failure (nothing aborted the attempt): a job holds the stage's licence, and the chain
    // it ran in, while it waits out its retry (in the same step as the release: no other attempt
    // can act in between). The release's script holds nothing for a direct call (no job). A job
    // whose failure is its last takes nothing: it would revoke a live holder (a wake-up whose
    // window ended) and then fail for good, and nothing would carry the stage any more
    const spent = chain.failures + running.ownFailures + 1;
    const limited = reason === 'rate_limited';
    const failing = running.abortedBy === undefined && !limited && !job?.failsForGood?.(spent, error);
    // Stryker disable next-line StringLiteral: equivalent: `own` only names a job to the release, which ignores a job id that does not exist (and a direct call's release revokes nothing)
    const own = job?.id ?? '';
    const released = await this.store.release(running.sid, own, running.token, failing ? 'hold' : 'plain');
    // Stryker disable next-line ConditionalExpression: equivalent: a release that is not 'hold' revokes nothing (the list is empty)
    if (failing) await this.removeRevoked(released.revoked, job);
    // Stryker disable next-line ConditionalExpression: equivalent: `{ error: undefined }` and `{}` read the same to every caller (and JSON)
    const withError = error === undefined ? {} : { error };
    if (released.cancelled) return { ...base, ...withError, kind: 'cancelled', result: { ...result, cancelled: true } };
    if (released.lost || running.abortedBy === 'lock_lost') {
      return {
        ...base,
        ...withError,
        kind: 'lost',
        result: { ...result, reason: 'dispatch_lock_lost', retryable: true },
      };
    }
    if (running.abortedBy === 'close') return { ...base, ...withError, kind: 'interrupted', result };
    // not a failure: the job goes back to wait when the error reaches BullMQ, as it would without the engine
    if (limited) return { ...base, ...withError, kind: 'rate_limited', result };
    if (error !== undefined && reason === 'rollback_error')
      this.events.emit('hookFailed', { ref, hook: 'rollback', error });
    this.events.emit('failed', { ref, reason, ...withError, executorMs });
    return { ...base, ...withError, kind: 'failed', result, spent };
  }

  /** The executor sent nothing: the rollback, then the outcome's deferral (or a failure). */
  private async notSent(
    running: Running,
    payload: P,
    call: { buildId?: string },
    ctx: DispatchContext,
    raw: ExecutorResult<string>,
    executorMs: number,
    begun: Locked,
    thrownCapacity: boolean,
  ): Promise<Attempt> {
    const { opts } = this;
    const { ref } = running;
    const reason = reportedReason(raw, this.outcomes);
    try {
      // the lock is renewed through the rollback too, which may be slow
      await opts.rollback?.(ref, reason, ctx);
    } catch (error) {
      const result = { dispatched: false, reason, retryable: true, result: raw };
      return this.unsent(running, 'rollback_error', result, executorMs, error);
    }
    running.shut();
    if (opts.faultHook) await opts.faultHook('rolled-back', ref);

    const cls = thrownCapacity ? 'capacity' : this.outcomes.classOf(reason);
    // a shutdown is not an outcome: nothing is recorded, the job runs again (a lost lock neither:
    // the deferral's script finds it gone and records nothing)
    if (!cls || running.abortedBy === 'close') {
      const result = { dispatched: false, reason, retryable: raw.retryable ?? true, result: raw };
      return this.unsent(running, reason, result, executorMs);
    }
    const carry = this.carryOf(running, begun);
    // a capacity answer closes the gate of the resource it names, else of the stage's own
    const resource = cls === 'capacity' ? (raw.resource ?? running.resource) : undefined;
    const gate = resource === undefined ? undefined : { resource, mode: 'close' as const };
    // (only a gated deferral, park's, answers undefined)
    return (await this.defer(running, payload, call, cls, reason, raw, executorMs, carry, gate))!;
  }

  /**
   * A gated attempt: the resource's gate is closed (or another attempt probes it), so the stage
   * defers at once, a capacity deferral (`gate_closed`) in the resource's line, for its chain's
   * window but never less than the gate's rest. No executor, no rollback. Undefined when the gate
   * opened before the deferral was recorded: the attempt, still holding its lock, goes on.
   */
  private async park(running: Running, payload: P, call: { buildId?: string }, begun: Locked) {
    const raw: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'gate_closed' };
    const carry = this.carryOf(running, begun);
    const gate = { resource: running.resource!, mode: 'gated' as const, atLeastMs: begun.gatedMs! };
    return this.defer(running, payload, call, 'capacity', 'gate_closed', raw, 0, carry, gate);
  }

  /** What a deferral carries on: a direct call goes on with the budget of the job whose chain it continues. */
  private carryOf(running: Running, begun: Locked): Carry {
    return { budget: running.job ?? licenceBudget(begun, this.opts.retry.backoff), wakeSeq: begun.wakeSeq };
  }

  /**
   * What a success does to its resource's line: wake `capacityLeft` stages, else `SLOW_START`; a
   * success that saw no slot left closes the gate for the capacity window instead (kept, as a
   * capacity answer's, until every stage parked behind it came due once).
   */
  private lineWake(raw: ExecutorResult<string>): number | string {
    const left = capacityCount.safeParse(raw.capacityLeft).success ? Math.min(raw.capacityLeft!, MAX_WAKE) : SLOW_START;
    if (left > 0) return this.opts.lineOrder === 'roundRobin' ? `r${left}` : left;
    return this.closeFor(Math.round(1000 * this.opts.windows.capacitySeconds));
  }

  /** A release's order to close the resource's gate for `windowMs` (kept until every stage parked behind it came due once). */
  private closeFor(windowMs: number): string {
    return `c${windowMs}:${1000 * this.opts.windows.capacityMaxSeconds}`;
  }

  /** A success opened (or closed) its resource's gate and woke stages of its line: they run now. */
  private lineWoken(running: Running, line: NonNullable<Released['line']>): void {
    const resource = running.resource!;
    if (line.closed) {
      const until = this.store.redisNow() + 1000 * this.opts.windows.capacitySeconds;
      this.events.emit('gateClosed', { resource, until, ref: running.ref, reason: 'no_capacity_left' });
    }
    if (line.opened) this.events.emit('gateOpened', { resource, woken: line.woken.length });
    for (const w of line.woken)
      this.events.emit('woken', { ref: parseStageId(w.sid), jobId: w.wakeUpJobId, early: true });
    void this.store.promote(line.woken.map((w) => w.wakeUpJobId)).catch(() => undefined);
  }

  private async defer(
    running: Running,
    payload: P,
    call: { buildId?: string },
    cls: OutcomeClass,
    reason: string,
    raw: ExecutorResult<string>,
    executorMs: number,
    carry: Carry,
    /** The resource: its gate closes (`close`), or the stage waits behind it (`gated`: at least `atLeastMs`). */
    gate?: { resource: string; mode: 'close' | 'gated'; atLeastMs?: number },
  ): Promise<Attempt | undefined> {
    const { store, opts } = this;
    const { ref, sid, token, job, chain, ownFailures } = running;
    const base = { chain, ownFailures };
    // Stryker disable next-line StringLiteral: equivalent: for a direct call (no job) the release's and the deferral's scripts act on `own` only where a job of that id exists
    const own = job?.id ?? '';
    const deferrals = chain[cls] + 1;
    // one window (its jitter drawn once); a gated stage never comes back before the gate's window ends (the probe's turn)
    const windowMs = Math.max(gate?.atLeastMs ?? 0, windowFor(opts.windows, cls, deferrals, raw.retryAfterMs));
    const limit = cls === 'capacity' ? opts.limits.maxCapacityDeferrals : opts.limits.maxIdempotentDeferrals;
    if (deferrals > limit) {
      // Bounded: the chain ends here, as done (idempotent: its licence revoked) or as a terminal
      // failure (capacity: the job's failure holds the stage, as any real failure does).
      const result = { dispatched: false, reason, retryable: false, result: raw };
      // a capacity answer closes its resource's gate for its window all the same (a probe's lease
      // would otherwise lapse after lockMs, and the next dispatch probe again)
      const closes =
        gate?.mode === 'close' ? { resource: encodeResource(gate.resource), wake: this.closeFor(windowMs) } : undefined;
      const mode = cls === 'idempotent' ? 'end' : 'plain';
      const released = await store.release(sid, own, token, mode, job?.stalled, closes);
      // an attempt whose lock expired meanwhile ends nothing: it tries again, like any lost attempt
      if (released.lost)
        return { ...base, kind: 'lost', result: { ...result, reason: 'dispatch_lock_lost', retryable: true } };
      await this.removeRevoked(released.revoked, job);
      if (released.line?.closed && gate) {
        const until = store.redisNow() + windowMs;
        this.events.emit('gateClosed', { resource: gate.resource, until, ref, reason });
      }
      // a cancel that came first wins over the bound, as over any outcome
      if (released.cancelled) return { ...base, kind: 'cancelled', result: { ...result, cancelled: true } };
      const outcome = cls === 'idempotent' ? 'completed' : 'failed';
      this.events.emit('limit', { ref, class: cls, reason, deferrals: chain[cls], outcome });
      if (cls === 'idempotent') return { ...base, kind: 'done', result: { ...result, completed: true } };
      return { ...base, kind: 'limit', result: { ...result, limitReached: true } };
    }

    const next: ChainState = { ...chain, [cls]: deferrals, failures: chain.failures + ownFailures };
    const data = dispatchJobData(ref, payload, call.buildId, {
      reason,
      class: cls,
      deferrals,
      ...(gate ? { resource: gate.resource } : {}),
    });
    // a downstream's hint stands even when capacity returned meanwhile (the stage never asks
    // before it), and wakeDeferred leaves such a deferral asleep
    const hinted = cls === 'capacity' && raw.retryAfterMs !== undefined;
    /** Builds the wake-up for a window of `windowMs` and records it (with its marker and licence) in one MULTI. */
    const record = async (windowMs: number, wakeSeq: string) => {
      // The window is decided on Redis' clock: the wake-up's timestamp is Redis' time (as last
      // measured), and the marker expires at the same `until` by Redis' own clock.
      const timestamp = store.redisNow();
      const until = timestamp + windowMs;
      const id = wakeUpJobId(sid, cls, next, until);
      const wakeUp = new Job(this.queue, ref.stage, data, this.jobOptions({ delay: windowMs }, carry.budget), id);
      // set after construction: BullMQ stores a `timestamp` given in the options twice (the job's field and its opts)
      wakeUp.timestamp = timestamp;
      const log = opts.jobLog
        ? `${new Date(timestamp).toISOString()} deferred #${deferrals} (${cls}): ${reason}; wakes at ${new Date(until).toISOString()}`
        : '';
      // (the deferral's script reads it only for a capacity deferral)
      const first = chain.capacity === 0;
      const gated = gate && {
        resource: encodeResource(gate.resource),
        mode: gate.mode,
        // the gate outlives its window until every stage parked behind it came due once
        parkMs: 1000 * opts.windows.capacityMaxSeconds,
      };
      // (the begin read the wake count of the line of the stage's own resource, not of one the answer names)
      const seenLine = running.resource === undefined ? '' : encodeResource(running.resource);
      const done = await store.defer(
        sid,
        token,
        wakeUp,
        until,
        log,
        own,
        { cls, first, hinted, wakeSeq, seenLine },
        gated,
      );
      return { ...done, id, until };
    };
    let recorded = await record(windowMs, hinted ? '' : carry.wakeSeq);
    // a gated stage whose gate opened (or whose line woke) since its begin: it is not parked
    // (undefined: the attempt, still holding its lock, goes on to its executor)
    if (recorded.woken && gate?.mode === 'gated') return undefined;
    // capacity returned (wakeDeferred) while this attempt was in flight: not a full window, a short
    // one (never a longer one: a window already shorter than inFlightRetryMs stays)
    if (recorded.woken) recorded = await record(Math.min(opts.inFlightRetryMs, windowMs), '');
    const { id, until } = recorded;
    const result: DispatchResult = { dispatched: false, reason, retryable: true, result: { ...raw, retryable: true } };
    if (recorded.cancelled) return { ...base, kind: 'cancelled', result: { ...result, cancelled: true } };
    // The lock expired under us (e.g. across a failover): nothing was recorded, and another
    // attempt may own the stage now. A job tries again later, as if it had found it in flight.
    if (!recorded.recorded) {
      return {
        ...base,
        kind: 'lost',
        result: { dispatched: false, reason: 'dispatch_lock_lost', retryable: true, result: raw },
      };
    }
    if (opts.faultHook) await opts.faultHook('deferral-recorded', ref);
    await this.removeRevoked(recorded.revoked, job);
    if (recorded.closed && gate) this.events.emit('gateClosed', { resource: gate.resource, until, ref, reason });
    this.events.emit('deferred', {
      ref,
      reason,
      class: cls,
      until,
      deferrals,
      wakeUpJobId: id,
      executorMs,
      ...(gate ? { resource: gate.resource } : {}),
    });
    let journalFailed = false;
    try {
      await opts.journal?.(ref, { type: 'stage_deferred', reason, class: cls, until, deferrals, wakeUpJobId: id });
    } catch (error) {
      // the deferral is the fact; a journal that failed is reported, and spends no attempt
      journalFailed = true;
      this.events.emit('hookFailed', { ref, hook: 'journal', error });
    }
    return {
      kind: 'deferred',
      chain: next,
      ownFailures: 0,
      result: journalFailed ? { ...result, until, journalFailed } : { ...result, until },
    };
  }

  /**
   * BullMQ options of a dispatch job the engine adds: the retry budget of the
   * job it comes from (recorded when that one was added), else this engine's.
   */
  jobOptions(extra: { delay?: number; jobId?: string; deduplication?: { id: string } }, from?: RetryBudget) {
    return {
      attempts: from?.attempts ?? this.opts.retry.attempts,
      backoff: from?.backoff ?? this.opts.retry.backoff,
      removeOnComplete: this.opts.removeOnComplete,
      ...extra,
    };
  }

  /** Revoked wake-ups are removed; the running job itself completes on its own; a failed job stays on record. */
  private async removeRevoked(revoked: string[], job: JobContext | undefined): Promise<void> {
    // the scripts' `revoke` never lists a failed job's record (`?`): those stay
    // (not the running job itself: it completes on its own, and a stalled one, back in wait, runs again)
    const ids = revoked.map(jobIdOfLicence).filter((id) => id !== job?.id);
    await this.store.removeJobs(ids);
  }

  /** Renews the lock of every running attempt; a lost lock or a cancel aborts that executor's signal. */
  private renewLocks(): void {
    for (const r of this.running) {
      this.store.extend(r.sid, r.token, this.opts.lockMs).then(
        (state) => {
          if (state === 'lost') r.abort(new AbortedBy('lock_lost'));
          else if (state === 'cancelled') r.abort(new AbortedBy('cancel'));
        },
        () => undefined,
      );
    }
  }
}

/**
 * The chain an attempt runs in: it goes on from the stage's licence, a wake-up whose id carries
 * it (plus, for a direct call, the failures the licensed job has spent since), unless the
 * licence is marked '!' (a clear, a job retried after it failed for good): then it starts
 * afresh. Any other job holding the licence (one waiting out its retry) began a fresh chain.
 */
function chainOf(begun: Locked): ChainState {
  const base = (begun.licence ? parseLicence(begun.licence)?.chain : undefined) ?? FRESH_CHAIN;
  return { ...base, failures: base.failures + begun.licenceFailures };
}

/** The retry budget of the job holding the licence, which a direct call goes on with; none when it has no `attempts`. */
function licenceBudget(begun: Locked, backoff: RetryBudget['backoff']): RetryBudget | undefined {
  const retry = begun.licenceRetry;
  if (retry?.attempts === undefined) return undefined;
  return {
    attempts: retry.attempts,
    backoff: (retry.backoff as JobContext['backoff'] | undefined) ?? backoff,
  };
}

/** The answer of an attempt that took no lock (or ended without running the executor). */
function plain(kind: Attempt['kind'], reason: string, retryable: boolean, extra?: Partial<DispatchResult>): Attempt {
  return { kind, chain: FRESH_CHAIN, ownFailures: 0, result: { dispatched: false, reason, retryable, ...extra } };
}

/** BullMQ's `Worker.RateLimitError()`, told as BullMQ tells it: by its message (an HTTP client's `RateLimitError` is a failure). */
function isRateLimit(error: unknown): boolean {
  return error instanceof Error && error.message === 'bullmq:rateLimitExceeded';
}

/** How many stages of its line a success wakes when its answer gives no `capacityLeft`. */
const SLOW_START = 2;
