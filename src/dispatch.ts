import { randomUUID } from 'node:crypto';
import { Job, UnrecoverableError, type Queue } from 'bullmq';
import { z } from 'zod';
import type { DeferralStore } from './deferral-store';
import { InvalidExecutorResultError } from './errors';
import { FRESH_CHAIN, parseLicence, wakeUpJobId, type ChainState, type DispatchJobData } from './job-data';
import type { ResolvedOptions } from './options';
import { formatZodError } from './options';
import { classifyNotSentReasons, outcomeClass } from './outcomes';
import type { DispatchContext, DispatchResult, ExecutorResult, OutcomeClass, StageRef } from './types';

/** How one dispatch attempt ended, for the processor; `result` is what `dispatchStage` returns. */
export interface Attempt {
  kind: 'dispatched' | 'suppressed' | 'in_flight' | 'stale' | 'deferred' | 'done' | 'cancelled' | 'failed' | 'limit';
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

const executorResultSchema = z.object({
  dispatched: z.boolean(),
  jobs: z.number(),
  reason: z.string().nullable(),
  retryable: z.boolean().optional(),
  notSent: z.instanceof(Map).optional(),
});

/**
 * One dispatch attempt of one stage: the contract of `dispatchStage`.
 * begin (1 round trip) -> executor -> rollback -> defer (1 MULTI) or release.
 */
export class Dispatcher<P> {
  constructor(
    private readonly opts: ResolvedOptions<P>,
    private readonly store: DeferralStore,
    private readonly queue: Queue,
    private readonly closing: AbortSignal,
  ) {}

  async attempt(
    ref: StageRef,
    sid: string,
    payload: P,
    call: { buildId?: string; force?: boolean },
    job?: JobContext,
  ): Promise<Attempt> {
    const { store, opts } = this;
    const token = randomUUID();
    const begun = await store.begin(sid, token, opts.lockMs, job?.id ?? '', job?.isWakeUp ?? false);
    if (begun.kind === 'deferred') {
      const lic = parseLicence(begun.wakeUpJobId);
      const reason = lic?.cls === 'idempotent' ? 'deferred_idempotent' : 'deferred_capacity';
      const until = Date.now() + begun.remainingMs;
      return { kind: 'suppressed', chain: FRESH_CHAIN, result: { dispatched: false, reason, retryable: true, deferred: true, until } };
    }
    if (begun.kind === 'in_flight') {
      return { kind: 'in_flight', chain: FRESH_CHAIN, result: { dispatched: false, reason: 'dispatch_in_flight', retryable: true } };
    }
    if (begun.kind === 'stale') {
      return { kind: 'stale', chain: FRESH_CHAIN, result: { dispatched: false, reason: 'stale_wake_up', retryable: false } };
    }
    const chain = (begun.licence && parseLicence(begun.licence)?.chain) || FRESH_CHAIN;
    // A wake-up's last real failure ends the chain: its licence (begin checked
    // it is this job's) must not outlive it, or the failed job would block
    // every later enqueue of the stage.
    const lastFailure = (error?: unknown) =>
      job?.isWakeUp === true &&
      (chain.failures + job.attemptsMade + 1 >= opts.retry.attempts || error instanceof UnrecoverableError);
    await opts.faultHook?.('lock-taken', ref);
    const ctx = this.context(call);
    const stopHeartbeat = this.heartbeat(sid, token, ctx.controller);

    let raw: ExecutorResult;
    try {
      raw = this.validate(await opts.executor(ref, payload, ctx.ctx));
    } catch (error) {
      stopHeartbeat();
      const released = await store.release(sid, token, lastFailure(error));
      const result = { dispatched: false, reason: 'executor_error', retryable: true };
      return { kind: released.cancelled ? 'cancelled' : 'failed', chain, error, result };
    }
    await opts.faultHook?.('executor-answered', ref);

    if (raw.dispatched) {
      stopHeartbeat();
      const released = await store.release(sid, token, true);
      await opts.faultHook?.('released', ref);
      await this.removeRevoked(released.revoked, job);
      return { kind: 'dispatched', chain, result: { dispatched: true, reason: null, retryable: false, result: raw } };
    }

    const dominant = raw.notSent && raw.notSent.size > 0 ? classifyNotSentReasons(raw.notSent) : null;
    const reason = dominant ?? raw.reason ?? 'no_jobs_sent';
    try {
      // the heartbeat keeps the lock through the rollback, which may be slow
      await opts.rollback?.(ref, reason, ctx.ctx);
    } catch (error) {
      stopHeartbeat();
      const released = await store.release(sid, token, lastFailure(error));
      const result = { dispatched: false, reason, retryable: true, result: raw };
      return { kind: released.cancelled ? 'cancelled' : 'failed', chain, error, result };
    }
    stopHeartbeat();
    await opts.faultHook?.('rolled-back', ref);

    const cls = outcomeClass(reason);
    if (!cls) {
      const released = await store.release(sid, token, lastFailure());
      const result = { dispatched: false, reason, retryable: raw.retryable ?? true, result: raw };
      if (released.cancelled) return { kind: 'cancelled', chain, result: { ...result, cancelled: true } };
      return { kind: 'failed', chain, result };
    }
    return this.defer(ref, sid, token, payload, call, job, chain, cls, reason, raw);
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
  ): Promise<Attempt> {
    const { store, opts } = this;
    const deferrals = chain[cls] + 1;
    const limit = cls === 'capacity' ? opts.limits.maxCapacityDeferrals : opts.limits.maxIdempotentDeferrals;
    if (deferrals > limit) {
      // Bounded: the chain ends here, either as a terminal failure or as done.
      const released = await store.release(sid, token, true);
      await this.removeRevoked(released.revoked, job);
      const result = { dispatched: false, reason, retryable: false, result: raw };
      if (cls === 'idempotent') return { kind: 'done', chain, result: { ...result, completed: true } };
      return { kind: 'limit', chain: { ...chain, capacity: deferrals }, result: { ...result, limitReached: true } };
    }

    const seconds = cls === 'capacity' ? opts.windows.capacitySeconds : opts.windows.idempotentSeconds;
    const windowMs = Math.max(1, Math.round(seconds * 1000 * (1 - opts.windows.jitter * Math.random())));
    const until = Date.now() + windowMs;
    const next: ChainState = { ...chain, [cls]: deferrals, failures: chain.failures + (job?.attemptsMade ?? 0) };
    const id = wakeUpJobId(sid, cls, next, until);
    const data: DispatchJobData<P> = {
      v: 1,
      scope: [...ref.scope],
      stage: ref.stage,
      payload,
      ...(call.buildId === undefined ? {} : { buildId: call.buildId }),
      wakeUp: true,
      reason,
      class: cls,
      until: new Date(until).toISOString(),
      deferrals,
    };
    const wakeUp = new Job(this.queue, ref.stage, data, this.jobOptions({ delay: windowMs }), id);
    const log = opts.jobLog
      ? `${new Date().toISOString()} deferred #${deferrals} (${cls}): ${reason}; wakes at ${data.until}`
      : '';
    const recorded = await store.defer(sid, token, wakeUp, windowMs, log);
    const result: DispatchResult = { dispatched: false, reason, retryable: true, result: { ...raw, retryable: true } };
    if (!recorded.recorded && recorded.cancelled) {
      return { kind: 'cancelled', chain, result: { ...result, cancelled: true } };
    }
    if (!recorded.recorded) {
      // The lock expired before the deferral was recorded (a stall longer than
      // lockMs): nothing was written, so the job must come back, not complete,
      // or the stage is lost. Like a dispatch in flight: delayed, no attempt used.
      return { kind: 'in_flight', chain, result: { dispatched: false, reason: 'dispatch_lock_lost', retryable: true } };
    }
    await opts.faultHook?.('deferral-recorded', ref);
    await this.removeRevoked(recorded.revoked, job);
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
    const ids = revoked.map((l) => (l.endsWith('!') ? l.slice(0, -1) : l)).filter((id) => id !== job?.id);
    if (ids.length > 0) await this.store.removeJobs(ids);
  }

  private validate(value: unknown): ExecutorResult {
    const parsed = executorResultSchema.safeParse(value);
    if (!parsed.success) {
      throw new InvalidExecutorResultError(`The executor returned an invalid result: ${formatZodError(parsed.error, value)}`);
    }
    return value as ExecutorResult;
  }

  private context(call: { buildId?: string; force?: boolean }) {
    const controller = new AbortController();
    const signal = AbortSignal.any([controller.signal, this.closing]);
    const ctx: DispatchContext = { buildId: call.buildId, force: call.force ?? false, signal };
    return { controller, ctx };
  }

  /** Renews the lock every third of its TTL; aborts the executor's signal if the lock is lost. */
  private heartbeat(sid: string, token: string, controller: AbortController): () => void {
    const timer = setInterval(() => {
      this.store.extend(sid, token, this.opts.lockMs).then(
        (held) => {
          if (!held) controller.abort(new Error('dispatch lock lost'));
        },
        () => undefined,
      );
    }, Math.floor(this.opts.lockMs / 3));
    timer.unref();
    return () => clearInterval(timer);
  }
}
