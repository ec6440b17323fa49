import { randomUUID } from 'node:crypto';
import { Job, type Queue } from 'bullmq';
import type { DeferralStore } from './deferral-store';
import type { EngineEmitter } from './events';
import { InvalidExecutorResultError } from './errors';
import { dispatchJobData, FRESH_CHAIN, jobIdOfLicence, parseLicence, wakeUpJobId, type ChainState } from './job-data';
import type { ResolvedOptions } from './options';
import { classifyNotSentReasons, outcomeClass } from './outcomes';
import type { DispatchContext, DispatchResult, ExecutorResult, OutcomeClass, StageRef } from './types';

/** How one dispatch attempt ended, for the processor; `result` is what `dispatchStage` returns. */
export interface Attempt {
  kind:
    | 'dispatched'
    | 'suppressed'
    | 'in_flight'
    | 'lost'
    | 'stale'
    | 'deferred'
    | 'done'
    | 'cancelled'
    | 'failed'
    | 'limit';
  result: DispatchResult;
  /** The chain state the attempt ran under (after it, for `deferred` and `limit`). */
  chain: ChainState;
  /** What the executor (or rollback) threw. */
  error?: unknown;
}

/** The job being processed, when the attempt comes from the worker. */
export interface JobContext {
  id: string;
  isWakeUp: boolean;
  /** BullMQ's failed attempts of this job so far. */
  attemptsMade: number;
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
  }

  /** Attempts whose executor is running: their locks are renewed, their signals aborted on close. */
  private readonly running = new Map<string, { sid: string; controller: AbortController }>();
  private readonly ticker: NodeJS.Timeout;

  /** Aborts every running executor's signal and stops renewing locks. */
  close(reason: Error): void {
    clearInterval(this.ticker);
    for (const { controller } of this.running.values()) controller.abort(reason);
  }

  async attempt(
    ref: StageRef,
    sid: string,
    payload: P,
    call: { buildId?: string; force?: boolean },
    job?: JobContext,
  ): Promise<Attempt> {
    const { store, opts } = this;
    // `<job id>\n<random>`: a redelivered job recognises its crashed attempt's lock.
    const token = `${job?.id ?? ''}\n${randomUUID()}`;
    const begun = await store.begin(sid, token, opts.lockMs, job?.id ?? '', jobKind(job));
    if (begun.kind === 'deferred') {
      const lic = parseLicence(begun.wakeUpJobId);
      const reason = lic?.cls === 'idempotent' ? 'deferred_idempotent' : 'deferred_capacity';
      const until = Date.now() + begun.remainingMs;
      this.events.emit('suppressed', { ref, reason, until, via: 'dispatch' });
      return {
        kind: 'suppressed',
        chain: FRESH_CHAIN,
        result: { dispatched: false, reason, retryable: true, deferred: true, until },
      };
    }
    if (begun.kind === 'in_flight') {
      return {
        kind: 'in_flight',
        chain: FRESH_CHAIN,
        result: { dispatched: false, reason: 'dispatch_in_flight', retryable: true },
      };
    }
    if (begun.kind === 'cancelled') {
      return {
        kind: 'cancelled',
        chain: FRESH_CHAIN,
        result: { dispatched: false, reason: 'cancelled', retryable: false, cancelled: true },
      };
    }
    if (begun.kind === 'stale') {
      return {
        kind: 'stale',
        chain: FRESH_CHAIN,
        result: { dispatched: false, reason: 'stale_wake_up', retryable: false },
      };
    }
    const chain = (begun.licence && parseLicence(begun.licence)?.chain) || FRESH_CHAIN;
    if (opts.faultHook) await opts.faultHook('lock-taken', ref);
    if (job?.isWakeUp) this.events.emit('woken', { ref, jobId: job.id });
    const controller = new AbortController();
    const ctx: DispatchContext = { buildId: call.buildId, force: call.force ?? false, signal: controller.signal };
    this.running.set(token, { sid, controller });
    const stopHeartbeat = () => this.running.delete(token);

    let raw: ExecutorResult;
    const started = performance.now();
    try {
      raw = checkExecutorResult(await opts.executor(ref, payload, ctx));
    } catch (error) {
      stopHeartbeat();
      const executorMs = performance.now() - started;
      const released = await store.release(sid, token, false);
      const result = { dispatched: false, reason: 'executor_error', retryable: true };
      this.events.emit('failed', { ref, reason: 'executor_error', error, executorMs });
      return { kind: released.cancelled ? 'cancelled' : 'failed', chain, error, result };
    }
    const executorMs = performance.now() - started;
    if (opts.faultHook) await opts.faultHook('executor-answered', ref);

    if (raw.dispatched) {
      stopHeartbeat();
      const released = await store.release(sid, token, true);
      await this.removeRevoked(released.revoked, job);
      if (opts.faultHook) await opts.faultHook('released', ref);
      this.events.emit('dispatched', { ref, jobs: raw.jobs, executorMs });
      return { kind: 'dispatched', chain, result: { dispatched: true, reason: null, retryable: false, result: raw } };
    }

    const reason = reportedReason(raw);
    try {
      // the lock is renewed through the rollback too, which may be slow
      await opts.rollback?.(ref, reason, ctx);
    } catch (error) {
      stopHeartbeat();
      const released = await store.release(sid, token, false);
      const result = { dispatched: false, reason, retryable: true, result: raw };
      return { kind: released.cancelled ? 'cancelled' : 'failed', chain, error, result };
    }
    stopHeartbeat();
    if (opts.faultHook) await opts.faultHook('rolled-back', ref);

    const cls = outcomeClass(reason);
    if (!cls) {
      const released = await store.release(sid, token, false);
      const result = { dispatched: false, reason, retryable: raw.retryable ?? true, result: raw };
      this.events.emit('failed', { ref, reason, executorMs });
      if (released.cancelled) return { kind: 'cancelled', chain, result: { ...result, cancelled: true } };
      return { kind: 'failed', chain, result };
    }
    return this.defer(ref, sid, token, payload, call, job, chain, cls, reason, raw, executorMs);
  }

  private async defer(
    ref: StageRef,
    sid: string,
    token: string,
    payload: P,
    call: { buildId?: string },
    job: JobContext | undefined,
    chain: ChainState,
    cls: OutcomeClass,
    reason: string,
    raw: ExecutorResult,
    executorMs: number,
  ): Promise<Attempt> {
    const { store, opts } = this;
    const deferrals = chain[cls] + 1;
    const limit = cls === 'capacity' ? opts.limits.maxCapacityDeferrals : opts.limits.maxIdempotentDeferrals;
    if (deferrals > limit) {
      // Bounded: the chain ends here, as done (idempotent) or as a terminal failure (capacity).
      const result = { dispatched: false, reason, retryable: false, result: raw };
      if (cls === 'idempotent') {
        const released = await store.release(sid, token, true);
        await this.removeRevoked(released.revoked, job);
        return { kind: 'done', chain, result: { ...result, completed: true } };
      }
      await store.release(sid, token, false);
      return { kind: 'limit', chain: { ...chain, capacity: deferrals }, result: { ...result, limitReached: true } };
    }

    const seconds = cls === 'capacity' ? opts.windows.capacitySeconds : opts.windows.idempotentSeconds;
    const windowMs = Math.max(1, Math.round(seconds * 1000 * (1 - opts.windows.jitter * Math.random())));
    const until = Date.now() + windowMs;
    const next: ChainState = { ...chain, [cls]: deferrals, failures: chain.failures + (job?.attemptsMade ?? 0) };
    const id = wakeUpJobId(sid, cls, next, until);
    const data = dispatchJobData(ref, payload, call.buildId, {
      reason,
      class: cls,
      until: new Date(until).toISOString(),
      deferrals,
    });
    const wakeUp = new Job(this.queue, ref.stage, data, this.jobOptions({ delay: windowMs }), id);
    const log = opts.jobLog
      ? `${new Date().toISOString()} deferred #${deferrals} (${cls}): ${reason}; wakes at ${data.until}`
      : '';
    const recorded = await store.defer(sid, token, wakeUp, windowMs, log);
    const result: DispatchResult = { dispatched: false, reason, retryable: true, result: { ...raw, retryable: true } };
    if (recorded.cancelled) return { kind: 'cancelled', chain, result: { ...result, cancelled: true } };
    // The lock expired under us (e.g. across a failover): nothing was recorded, and another
    // attempt may own the stage now. A job tries again later, as if it had found it in flight.
    if (!recorded.recorded) {
      return {
        kind: 'lost',
        chain,
        result: { dispatched: false, reason: 'dispatch_lock_lost', retryable: true, result: raw },
      };
    }
    if (opts.faultHook) await opts.faultHook('deferral-recorded', ref);
    await this.removeRevoked(recorded.revoked, job);
    this.events.emit('deferred', { ref, reason, class: cls, until, deferrals, wakeUpJobId: id, executorMs });
    await opts.journal?.(ref, { type: 'stage_deferred', reason, class: cls, until, deferrals, wakeUpJobId: id });
    return { kind: 'deferred', chain: next, result: { ...result, until } };
  }

  /** BullMQ options of every dispatch job the engine adds. */
  jobOptions(extra: { delay?: number; jobId?: string; deduplication?: { id: string } }) {
    return {
      attempts: this.opts.retry.attempts,
      backoff: this.opts.retry.backoff,
      removeOnComplete: true,
      ...extra,
    };
  }

  /** Revoked wake-ups are removed; the running job itself completes on its own. */
  private async removeRevoked(revoked: string[], job: JobContext | undefined): Promise<void> {
    const ids = revoked.map(jobIdOfLicence).filter((id) => id !== job?.id);
    if (ids.length > 0) await this.store.removeJobs(ids);
  }

  /** One pipeline renews the lock of every running attempt; a lost lock aborts that executor's signal. */
  private renewLocks(): void {
    for (const [token, { sid, controller }] of this.running) {
      this.store.extend(sid, token, this.opts.lockMs).then(
        (held) => {
          if (!held) controller.abort(new Error('dispatch lock lost'));
        },
        () => undefined,
      );
    }
  }
}

/**
 * The reason an attempt reports: with a non-empty `notSent`, its dominant
 * reason when all are deferrable, else its most frequent non-deferrable one
 * (a real failure wins); without, the executor's `reason`.
 */
function reportedReason(raw: ExecutorResult): string {
  const counted = [...(raw.notSent ?? [])].filter(([, n]) => n > 0);
  if (counted.length === 0) return raw.reason ?? 'no_jobs_sent';
  const dominant = classifyNotSentReasons(new Map(counted));
  if (dominant) return dominant;
  const failures = counted.filter(([r]) => outcomeClass(r) === null).sort((a, b) => b[1] - a[1]);
  return failures[0]![0];
}

/** Checks the executor's answer at the boundary (hand-written: this runs once per dispatch). */
function checkExecutorResult(value: unknown): ExecutorResult {
  const r = value as Partial<ExecutorResult> | null;
  const problem =
    typeof r !== 'object' || r === null
      ? `an object, got ${r === null ? 'null' : typeof r}`
      : typeof r.dispatched !== 'boolean'
        ? `\`dispatched\` to be a boolean, got ${JSON.stringify(r.dispatched)}`
        : typeof r.jobs !== 'number'
          ? `\`jobs\` to be a number, got ${JSON.stringify(r.jobs)}`
          : r.reason !== null && typeof r.reason !== 'string'
            ? `\`reason\` to be a string or null, got ${JSON.stringify(r.reason)}`
            : r.retryable !== undefined && typeof r.retryable !== 'boolean'
              ? `\`retryable\` to be a boolean, got ${JSON.stringify(r.retryable)}`
              : r.notSent !== undefined && !(r.notSent instanceof Map)
                ? '`notSent` to be a Map'
                : null;
  if (problem) throw new InvalidExecutorResultError(`The executor returned an invalid result: expected ${problem}`);
  return r as ExecutorResult;
}

/** What begin needs to know of the job: a wake-up, or a job `enqueue` added (its id has `@r.`). */
function jobKind(job: JobContext | undefined): 'w' | 'r' | '' {
  if (!job) return '';
  if (job.isWakeUp) return 'w';
  return job.id.includes('@r.') ? 'r' : '';
}
