import { EventEmitter } from 'node:events';
import type { DeferredStage, StageRef } from './types';
import type { InvalidExecutorResultError } from './errors';

/** The engine's events. The engine tells what happened; listeners log, count or react. */
export interface EngineEvents {
  /** A dispatch sent jobs downstream. */
  dispatched: { ref: StageRef; jobs: number | undefined; executorMs: number };
  /** A deferral began (once per deferral, from the attempt that created it). */
  deferred: DeferredStage & { executorMs: number };
  /** A capacity answer closed a resource's gate (it was open, or its window had ended) until `until`. */
  gateClosed: { resource: string; until: number; ref: StageRef; reason: string };
  /**
   * A resource's gate opened: a success of one of its stages (its probe's, or any other's) or
   * `wakeDeferred({ resource })`; `woken`: the stages of its line woken with it.
   */
  gateOpened: { resource: string; woken: number };
  /** A dispatch or enqueue found the stage deferred and did nothing. */
  suppressed: { ref: StageRef; reason: string; until: number; via: 'dispatch' | 'enqueue' };
  /** `cancelActiveDispatch` ran. */
  cancelled: { ref: StageRef; reason: string; hadDeferral: boolean; inFlight: boolean; removedJobs: number };
  /** `clearDeferrals` ended `count` deferrals in `scope`. */
  cleared: { scope: readonly string[]; count: number };
  /**
   * A stage woke, reported by the process that woke it: with `early: true`,
   * `wakeDeferred` in this process ended the stage's deferral before its
   * window; without, a wake-up's run here started its stage's dispatch when
   * its window ended or after an operator's Promote (its first run: a retry
   * of the run does not report again). A wake-up's run never reports a wake
   * made by `wakeDeferred` or a clear elsewhere (the ops CLI prints its own).
   */
  woken: { ref: StageRef; jobId: string; early?: true };
  /**
   * This Worker host's clock leads Redis' by more than `maxClockSkewMs`: its
   * Worker promotes wake-ups that early, and a wake-up promoted more than
   * `maxClockSkewMs` early runs as an operator's Promote would (its stage
   * inside its window). Emitted at start-up and whenever a later reading of
   * the clock crosses the limit. Keep the hosts in NTP.
   */
  clockSkew: { leadMs: number; maxClockSkewMs: number };
  /** An attempt sent nothing for a non-deferrable reason, or the executor threw. */
  failed: { ref: StageRef; reason: string; error?: unknown; executorMs: number };
  /**
   * A chain reached its bound: `limits.maxCapacityDeferrals` (the job fails
   * with `DeferralLimitError`, `outcome: 'failed'`) or
   * `limits.maxIdempotentDeferrals` (the stage completes as already done,
   * `outcome: 'completed'`). `deferrals`: deferrals of `class` in a row before it.
   */
  limit: {
    ref: StageRef;
    class: 'capacity' | 'idempotent';
    reason: string;
    deferrals: number;
    outcome: 'failed' | 'completed';
  };
  /**
   * A host hook threw. `journal`: after the deferral was recorded (it stands;
   * no attempt is spent). `rollback`: the attempt counts as a real failure.
   */
  hookFailed: { ref: StageRef; hook: 'journal' | 'rollback'; error: unknown };
  /**
   * A dispatched attempt's release failed three tries (no reply, or an error
   * reply: Redis unreachable or failing over): the dispatch stands and is
   * answered so. If no try ran, the stage's lock is left: a job's dies with
   * the job, a direct call's after `lockMs` (until then the stage reads as in
   * flight). A licence the release would have revoked is left too: a job
   * still holding it (a wake-up, or a job waiting out its retry) may dispatch
   * the stage once more when it runs.
   */
  releaseFailed: { ref: StageRef; error: unknown };
  /**
   * The executor answered `dispatched: true` in a result of the wrong shape
   * (`jobs` not a number, `reason` neither a string nor null): the stage went
   * out, so the attempt stands as a dispatch (an error would have BullMQ
   * retry the job and send it again); `error` names the field. A result that
   * does not say `dispatched: true` is refused with that error instead.
   */
  resultInvalid: { ref: StageRef; error: InvalidExecutorResultError };
  /**
   * Fewer replicas than `waitForReplicas.replicas` acknowledged a `WAIT`
   * within its timeout: until they catch up, a failover may lose the `writes`
   * it covered (`op`: the kind of the first). The engine goes on, and sends no
   * `WAIT` for `skipMs`.
   */
  replicaLag: {
    op: 'defer' | 'cancel' | 'clear' | 'fail' | 'enqueue' | 'wake';
    writes: number;
    acked: number;
    wanted: number;
    skipMs: number;
  };
}

export type EngineEventName = keyof EngineEvents;
export type EngineListener<E extends EngineEventName> = (event: EngineEvents[E]) => void;

/** A typed EventEmitter; a throwing listener never breaks a dispatch. */
export class EngineEmitter {
  private readonly emitter = new EventEmitter();

  on<E extends EngineEventName>(name: E, listener: EngineListener<E>): this {
    this.emitter.on(name, listener);
    return this;
  }

  once<E extends EngineEventName>(name: E, listener: EngineListener<E>): this {
    this.emitter.once(name, listener);
    return this;
  }

  off<E extends EngineEventName>(name: E, listener: EngineListener<E>): this {
    this.emitter.off(name, listener);
    return this;
  }

  emit<E extends EngineEventName>(name: E, event: EngineEvents[E]): void {
    if (this.emitter.listenerCount(name) === 0) return;
    // rawListeners: a `once` listener comes wrapped, and calling the wrapper removes it
    for (const listener of this.emitter.rawListeners(name)) {
      try {
        (listener as EngineListener<E>)(event);
      } catch {
        // Listeners observe; they cannot change or break the dispatch.
      }
    }
  }

  removeAllListeners(): void {
    this.emitter.removeAllListeners();
  }
}
