import type IORedis from 'ioredis';
import type { DeferredStage, DispatchEngine, StageRef } from '../../src';
import { stageId } from '../../src';
import type { Harness } from './engine';
import { settledState } from './jobs';

/**
 * What a user sees of a stage, through the public API and BullMQ only: no key or field the
 * engine writes for itself is read here (but for the helpers at the end, whose names say so).
 */

type Engine = Pick<DispatchEngine, 'listDeferred' | 'isStageDeferred' | 'queue'>;

export const sameStage = (a: StageRef, b: StageRef): boolean =>
  a.stage === b.stage && a.scope.length === b.scope.length && a.scope.every((s, i) => s === b.scope[i]);

/** The stage's deferral as `listDeferred` shows it; undefined when it is not deferred. */
export async function listedDeferral(engine: Engine, ref: StageRef): Promise<DeferredStage | undefined> {
  return (await engine.listDeferred(ref.scope)).find((d) => sameStage(d.ref, ref));
}

const QUEUED = ['wait', 'delayed', 'active', 'prioritized', 'waiting-children'] as const;

/** The ids of the queue's jobs whose (published) data names `ref`, in `states` (by default: not finished). */
export async function stageJobs(engine: Engine, ref: StageRef, states: readonly string[] = QUEUED): Promise<string[]> {
  const jobs = await engine.queue.getJobs(states as never);
  return jobs
    .filter((j) => j?.data && sameStage({ scope: j.data.scope ?? [], stage: j.data.stage }, ref))
    .map((j) => j.id as string)
    .sort();
}

/**
 * One stage as a user sees it: whether it is deferred, its deferral as `listDeferred` lists it
 * (class, deferrals in a row, its wake-up), and its jobs that have not finished.
 */
export async function stageView(engine: Engine, ref: StageRef) {
  const listed = await listedDeferral(engine, ref);
  return {
    deferred: await engine.isStageDeferred(ref),
    listed: listed && { class: listed.class, deferrals: listed.deferrals, wakeUpJobId: listed.wakeUpJobId },
    jobs: await stageJobs(engine, ref),
  };
}

/** The wake-up of the stage's deferral, as `listDeferred` lists it. */
export async function wakeUpOf(engine: Engine, ref: StageRef): Promise<string> {
  const { listed } = await stageView(engine, ref);
  return listed!.wakeUpJobId;
}

/** A stage nothing holds: not deferred, nothing listed, no job left to run. */
export const FREE = { deferred: false, listed: undefined, jobs: [] };

/**
 * The redis time, ms (what every `until` is measured on).
 */
export async function redisNow(redis: IORedis): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

// ---------------------------------------------------------------------------------------------
// Internal: the helpers below reach into the engine's own keys. They are kept for what no user
// sees (a lock expiring under a frozen process, memory an index keeps); a core with another
// layout changes only these.
// ---------------------------------------------------------------------------------------------

/**
 * Internal: makes the stage's dispatch lock lapse at once, as it does under a process frozen
 * longer than `lockMs` (the lock is a key with a TTL; waiting it out would tie the test to time).
 */
export async function expireDispatchLockNow(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
): Promise<void> {
  await redis.del(`${q.prefix}:${q.queueName}:sd:inflight:${stageId(ref)}`);
}

/**
 * Internal: the records the engine keeps for `ref`'s failed-for-good jobs (their ids). A record
 * left for a job that no longer exists is memory no user sees until an enqueue drops it.
 */
export async function failedRecordsOf(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
): Promise<string[]> {
  const sid = stageId(ref);
  const members = await redis.zrangebylex(`${q.prefix}:${q.queueName}:sd:licences`, `[${sid}@`, `[${sid}@\xff`);
  return members.filter((m) => m.endsWith('?')).map((m) => m.slice(0, -1));
}

/**
 * Internal: whether `ref` is in its kind's capacity wait index (the order `wakeDeferred` wakes
 * chains in). A stage left in it after its chain ended changes no answer (its next chain's start
 * replaces the entry): it is memory every unfiltered `wakeDeferred` walks past.
 */
export async function inWaitIndex(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
): Promise<boolean> {
  const sid = stageId(ref);
  const kind = sid.slice(sid.lastIndexOf('/') + 1);
  return (await redis.zscore(`${q.prefix}:${q.queueName}:sd:wq:${kind}`, sid)) !== null;
}

/**
 * Internal: sets the start of `ref`'s capacity chain (its score in its kind's wait index) to
 * `ms`, for a test of `wakeDeferred`'s order among chains that began in the same millisecond (no
 * public call can make two chains start at once). `ref` must be deferred for capacity; answers
 * whether its entry was there and changed.
 */
export async function setChainStart(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
  ms: number,
): Promise<boolean> {
  const sid = stageId(ref);
  const kind = sid.slice(sid.lastIndexOf('/') + 1);
  return (await redis.zadd(`${q.prefix}:${q.queueName}:sd:wq:${kind}`, 'XX', 'CH', ms, sid)) === 1;
}

/**
 * Internal: takes from wake-up `wakeUpJobId` its hold on its stage (its licence), as a newer
 * deferral of the stage does, while the job itself stays: a wake-up that is no longer the stage's own.
 */
export async function revokeWakeUp(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  wakeUpJobId: string,
): Promise<void> {
  await redis.zrem(`${q.prefix}:${q.queueName}:sd:licences`, wakeUpJobId);
}

/**
 * Whether a cancel of `ref` reaches its failed job `jobId` (the job is on record as failed for
 * good): cancels the stage, retries the job by hand (Bull Board's Retry), runs it on a Worker and
 * answers how many executor calls that made and how the job ended. A job a cancel reached ends
 * without calling the executor.
 */
export async function retriedAfterCancel(
  h: Harness,
  ref: StageRef,
  jobId: string,
): Promise<{ calls: number; state: string | null }> {
  const before = h.executor.callsFor(ref);
  await h.engine.cancelActiveDispatch(ref);
  await (await h.engine.queue.getJob(jobId))!.retry('failed');
  const worker = h.engine.createWorker();
  try {
    const state = await settledState(h.engine.queue, jobId);
    return { calls: h.executor.callsFor(ref) - before, state };
  } finally {
    await worker.close();
  }
}

/**
 * Internal: the holds (licences and failed-for-good records) the engine keeps on `ref`. A hold
 * left on a stage nothing holds any more changes no answer (a cancel marked its jobs): it is
 * memory no user sees, kept for a stage that is not deferred, in flight, waiting out a retry or
 * failed for good.
 */
export async function holdsOn(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
): Promise<string[]> {
  const sid = stageId(ref);
  return redis.zrangebylex(`${q.prefix}:${q.queueName}:sd:licences`, `[${sid}@`, `[${sid}@\xff`);
}

/**
 * Internal: the chain (`capacity.idempotent.failures`) job `jobId` carries while it holds its
 * stage, for a test whose trap is set only when a job carries one (no public view shows it).
 */
export async function chainCarriedBy(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  jobId: string,
): Promise<string | null> {
  return redis.hget(`${q.prefix}:${q.queueName}:${jobId}`, 'sdk');
}

/**
 * Internal: the stage's dispatch lock as it is stored (null when there is none), to put back
 * with {@link restoreDispatchLock}: a process that dies before its lazy release leaves it so.
 */
export async function dispatchLockOf(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
): Promise<string | null> {
  return redis.get(`${q.prefix}:${q.queueName}:sd:inflight:${stageId(ref)}`);
}

/** Internal: puts back a dispatch lock read by {@link dispatchLockOf}, live for `ms`. */
export async function restoreDispatchLock(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
  value: string,
  ms: number,
): Promise<void> {
  await redis.set(`${q.prefix}:${q.queueName}:sd:inflight:${stageId(ref)}`, value, 'PX', ms);
}

/**
 * Internal: when `ref`'s capacity chain began (its score in its kind's wait index, ms), null when
 * it waits in none. wakeDeferred's order shows it only among several chains; a test of one
 * chain's start across its deferrals reads it here.
 */
export async function chainStartOf(
  redis: IORedis,
  q: { prefix: string; queueName: string },
  ref: StageRef,
): Promise<string | null> {
  const sid = stageId(ref);
  const kind = sid.slice(sid.lastIndexOf('/') + 1);
  return redis.zscore(`${q.prefix}:${q.queueName}:sd:wq:${kind}`, sid);
}
