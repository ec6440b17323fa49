import { DelayedError, UnrecoverableError, type Job, type Processor } from 'bullmq';
import type { DeferralStore } from '../deferral-store';
import type { Dispatcher, JobContext } from '../dispatch';
import {
  asTerminal,
  DeferralLimitError,
  DispatchFailedError,
  InvalidOptionsError,
  isStageDeferralError,
  ReplicationUnconfirmedError,
} from '../errors';
import { checkJobOptions, isWakeUpId, keptWhenFinished, parseJobData, refOf } from '../job-data';
import type { ResolvedOptions } from '../options';
import { stageId } from '../stage-ref';
import type { DispatchResult, ExecutorResult, StageRef } from '../types';

/**
 * BullMQ's own test (`err instanceof UnrecoverableError || err.name == 'UnrecoverableError'`):
 * the class of another copy of bullmq in the app (its Worker's) ends a job for good too.
 */
/**
 * The options of the Worker that runs the job (BullMQ hands it the Worker as its queue): its
 * `removeOnFail` applies to a job that has none of its own, as BullMQ applies it.
 */
function workerOptsOf(job: Job): { removeOnFail?: unknown } | undefined {
  return (job as unknown as { queue?: { opts?: { removeOnFail?: unknown } } }).queue?.opts;
}

function isUnrecoverable(error: Error): boolean {
  return error instanceof UnrecoverableError || error.name === 'UnrecoverableError';
}

/** The error a job fails with for good: the library's own error kept (see `asTerminal`), anything else wrapped. */
function terminal(error: Error): Error {
  if (isStageDeferralError(error)) return asTerminal(error);
  if (isUnrecoverable(error)) return error;
  const e = new UnrecoverableError(error.message);
  (e as Error & { cause?: unknown }).cause = error;
  return e;
}

/**
 * Whether an answer is already plain data JSON holds as it is, the common case:
 * the engine's copy of it (own fields, read once) whose values are strings,
 * finite numbers, booleans or null, its strings well under the size cap.
 */
function isFlat(answer: object): boolean {
  let size = 0;
  let keys = 0;
  for (const key in answer) {
    if (++keys > FLAT_KEYS) return false;
    const v = (answer as Record<string, unknown>)[key];
    size += key.length;
    if (typeof v === 'string') size += v.length;
    else if (!(
      v === null ||
      typeof v === 'boolean' ||
      (typeof v === 'number' && Number.isFinite(v) && !Object.is(v, -0))
    ))
      return false;
  }
  // (a character takes 6 of JSON at most, `\uXXXX`; a key or value's quotes and separators a few more)
  return size < MAX_STORED_ANSWER / 8;
}

/** The most fields an answer stored without the JSON round trip may have. */
const FLAT_KEYS = 64;

/** The largest executor answer a job's return value keeps, as JSON characters. */
const MAX_STORED_ANSWER = 1 << 20;

/**
 * The job's return value, which BullMQ stores as JSON when it completes the
 * job: an executor answer that JSON cannot hold (a BigInt, a cycle, a
 * `toJSON` that throws) would make that completion throw after the stage was
 * sent, and BullMQ's retry would send it again. The answer is kept as plain
 * data made from its JSON once (BullMQ serialises it again, maybe more than
 * once: a value that changes between calls must not matter), and left out
 * when JSON cannot hold it or it is over 1 MiB of JSON (a direct
 * `dispatchStage` returns the engine's copy of it: its own fields, read once).
 */
function storable(result: DispatchResult): DispatchResult {
  if (result.result === undefined || isFlat(result.result)) return result;
  const { result: answer, ...rest } = result;
  try {
    const json = JSON.stringify(answer);
    if (json === undefined || json.length > MAX_STORED_ANSWER) return rest;
    return { ...rest, result: JSON.parse(json) as ExecutorResult<string> };
  } catch {
    return rest;
  }
}

/** Delays the job by `ms` without spending an attempt (BullMQ's DelayedError). */
async function later(job: Job, token: string | undefined, ms: number): Promise<never> {
  await job.moveToDelayed(Date.now() + ms, token);
  throw new DelayedError();
}

/**
 * The job fails for good, recorded as such; a worker that no longer holds it (it stalled: the
 * job was handed on, and BullMQ would refuse this failure) ends nothing, quietly.
 */
async function failForGood(store: DeferralStore, job: Job, sid: string, ctx: JobContext, error: Error): Promise<never> {
  // a mark whose replicas did not confirm it ran: the job still fails for good (retried, it would
  // run its stage again past the bound)
  const marked = await store
    .markFailed(sid, ctx.id, keptWhenFinished(job.opts.removeOnFail ?? workerOptsOf(job)?.removeOnFail), ctx.bullToken)
    .catch((e: unknown) => {
      if (e instanceof ReplicationUnconfirmedError) return true;
      throw e;
    });
  if (!marked) throw new DelayedError();
  throw terminal(error);
}

/**
 * Whether a real failure, the `spent`-th of the job's chain, ends the job for good: its budget
 * is spent, the error is unrecoverable, or the Worker's maxStartedAttempts is reached (each wait
 * in flight counts as a start). Read only on a failure: the hot path reads nothing for it.
 */
function failsForGood(job: Job, ctx: JobContext, spent: number, error: unknown): boolean {
  const maxStarted = (job as unknown as { queue?: { opts?: { maxStartedAttempts?: number } } }).queue?.opts
    ?.maxStartedAttempts;
  return (
    spent >= ctx.attempts ||
    (error instanceof Error && isUnrecoverable(error)) ||
    (!!maxStarted && job.attemptsStarted >= maxStarted)
  );
}

/** How a job calls its dispatch when its data names no build (shared: nothing writes to it). */
const JOB_CALL = Object.freeze({ force: false });

/**
 * The BullMQ processor: one dispatch job in, one attempt of its stage.
 * - dispatched, deferred, suppressed, cancelled, stale, superseded, done: the
 *   job completes with the `DispatchResult` (a deferral lives on in its wake-up).
 * - in flight elsewhere, the lock expired before the deferral was recorded, a
 *   wake-up promoted early by a clock ahead of Redis', or the engine closing:
 *   the job is delayed (no attempt used) and tries again.
 * - the worker no longer holds BullMQ's lock of the job (it froze past its
 *   lock before the dispatch began: the job was, or will be, redelivered):
 *   nothing is begun, and a `DelayedError` leaves the job to BullMQ's stalled check.
 * - a real failure: thrown, so BullMQ's attempts and backoff apply, counted
 *   across the stage's chain (the job's own `attempts`); the last one is
 *   unrecoverable. A job retried by hand has what BullMQ gives it: with
 *   `resetAttemptsMade` a fresh budget, without it the attempts it has left.
 * - capacity deferral limit: `DeferralLimitError`, unrecoverable.
 * - malformed job data, or an id or options that break the producer contract
 *   (`checkJobOptions`): unrecoverable; other jobs are unaffected.
 * - a job of another queue than the engine's (a user's Worker with another
 *   `prefix` or queue name): `InvalidOptionsError`, unrecoverable, nothing
 *   dispatched (its deferrals and wake-ups would go to a queue that Worker never reads).
 */
export function createProcessor<P>(
  dispatcher: Dispatcher<P>,
  store: DeferralStore,
  opts: ResolvedOptions<P>,
): Processor {
  return async (job: Job, token?: string): Promise<DispatchResult> => {
    const id = job.id as string;
    // closed: refuse new jobs without spending an attempt (a user's own Worker may still be
    // fetching); they run on the next worker
    if (dispatcher.closed) return later(job, token, opts.inFlightRetryMs);
    const from = (job as { queueQualifiedName?: string }).queueQualifiedName;
    // Stryker disable next-line ConditionalExpression: equivalent for BullMQ's jobs: every Job BullMQ makes has queueQualifiedName (only a hand-made object lacks it)
    if (from !== undefined && from !== store.queue.qualifiedName) {
      throw terminal(
        new InvalidOptionsError(
          `Dispatch job ${id} comes from queue ${from}, but this engine's queue is ${store.queue.qualifiedName}: ` +
            "run engine.processor on a Worker with the engine's queueName and prefix (or use engine.createWorker()), " +
            'where its deferrals and wake-ups are',
        ),
      );
    }
    let data;
    let ref: StageRef;
    let sid: string;
    try {
      data = parseJobData(job.data, id);
      ref = refOf(data);
      sid = stageId(ref);
      checkJobOptions(job as Job & { id: string }, sid);
    } catch (error) {
      throw terminal(error as Error);
    }
    const ctx: JobContext = {
      id,
      isWakeUp: isWakeUpId(sid, id),
      attempts: job.opts.attempts ?? opts.retry.attempts,
      backoff: (job.opts.backoff as JobContext['backoff'] | undefined) ?? opts.retry.backoff,
    };
    ctx.failsForGood = (spent, error) => failsForGood(job, ctx, spent, error);
    // a wake-up carries its stage's resource: its attempt reads the gate without `resourceOf`
    if (data.resource !== undefined) ctx.resource = data.resource;
    // BullMQ's token '0' means "no lock" (its scripts then check none)
    if (token && token !== '0') ctx.bullToken = token;
    // (a BullMQ without the stalled count gives none: the release then never marks a job handed on)
    if (typeof job.stalledCounter === 'number') ctx.stalled = job.stalledCounter;
    let attempt;
    try {
      // Stryker disable next-line ConditionalExpression: equivalent: a new `{ buildId: undefined, force: false }` says what JOB_CALL says (the shared object only saves an allocation)
      const call = data.buildId === undefined ? JOB_CALL : { buildId: data.buildId, force: false };
      attempt = await dispatcher.attempt(ref, sid, data.payload as P, call, ctx);
    } catch (error) {
      // Stryker disable next-line ConditionalExpression: not reachable by a test: the closed check above runs first, and close() waits for running attempts before it closes their connection, so an attempt does not fail because of the close; kept as a guard
      if (dispatcher.closed) return later(job, token, opts.inFlightRetryMs);
      throw error;
    }
    switch (attempt.kind) {
      case 'in_flight':
      case 'lost':
        return later(job, token, opts.inFlightRetryMs);
      case 'gone':
        // this worker no longer holds the job: BullMQ would refuse any move of it, and its stalled
        // check hands the job on (DelayedError: BullMQ's Worker leaves the job where it is, quietly)
        throw new DelayedError();
      case 'early':
        // (a wakeDeferred or clear that ended the deferral meanwhile could not promote it: it was active)
        await job.moveToDelayed(Date.now() + (attempt.waitMs ?? 0), token);
        await store.promoteUnlessDeferred(sid, id);
        throw new DelayedError();
      case 'interrupted':
        return later(job, token, 0);
      case 'limit':
        return failForGood(
          store,
          job,
          sid,
          ctx,
          // Stryker disable next-line StringLiteral: equivalent: a capacity limit always carries the reason of the outcome that reached it
          new DeferralLimitError(ref, attempt.result.reason ?? '', attempt.chain.capacity),
        );
      case 'rate_limited':
        // BullMQ's own rate limit, handed back untouched: it puts the job back to wait, spending nothing
        throw attempt.error;
      case 'failed': {
        const error =
          attempt.error instanceof Error
            ? attempt.error
            : // Stryker disable next-line StringLiteral: equivalent: a real failure without an error always carries its outcome's reason
              new DispatchFailedError(ref, attempt.result.reason ?? 'unknown', dispatcher.outcomes.describe());
        // (the attempt's release used the same rule, on the same count: a last failure took no licence)
        if (ctx.failsForGood(attempt.spent!, error)) return failForGood(store, job, sid, ctx, error);
        // it waits out its backoff as the stage's licence holder (taken with the release): BullMQ
        // retries it, by its own attempts and backoff (a custom type by the Worker's strategy)
        throw error;
      }
      default:
        return storable(attempt.result);
    }
  };
}
