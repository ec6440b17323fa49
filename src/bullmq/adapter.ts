/**
 * Everything the engine uses that differs between BullMQ 5 and 6, in one place.
 * `bullmq` and `ioredis` are peer dependencies: the app's own copies are used,
 * so each call here works on either major (feature-detected, never by version).
 *
 * - the queue's Redis client: `queue.getBackend().client` (6) or `queue.client` (5);
 * - promoting a delayed job by id: `queue.getBackend().promote(id)` (6) or the
 *   queue's scripts' `promote(id)` (5, what `job.promote()` runs);
 * - a deduplication key whose job was lost (an outage took the job's hash,
 *   not the key): later BullMQ 6 releases replace it when a job is added
 *   (recoverStaleDeduplicationKey: 6.5.4 has it), 5.81 and 6.0.0 keep
 *   returning the lost job; `addDeduplicated` recovers it on every version;
 * - the start-up checks: a supported version, an ioredis connection and, on
 *   BullMQ 6 (which also runs on PostgreSQL and other Redis drivers), the Redis backend.
 *
 * The rest (Job, Worker, DelayedError, UnrecoverableError, moveToDelayed,
 * `deduplication`, the key layout the Lua scripts read) is the same in 5.81 and 6.
 */
import * as bullmq from 'bullmq';
import type { Job, JobsOptions, Queue, RedisClient } from 'bullmq';
import { UnsupportedBullMQError, UnsupportedConnectionError } from '../errors';

/** The BullMQ versions this library supports and tests (the peer dependency's range). */
export const SUPPORTED_BULLMQ = '^5.81.0 || ^6.0.0';

/** Lowest supported minor of each supported major (SUPPORTED_BULLMQ as data). */
const MINIMUM: Record<number, number> = { 5: 81, 6: 0 };

/** True when `version` (e.g. `'5.81.5'`) is in SUPPORTED_BULLMQ. */
export function isSupportedBullMQ(version: string | undefined): boolean {
  // Stryker disable next-line StringLiteral: equivalent: undefined's fallback fails the pattern whatever its text
  const m = /^(\d+)\.(\d+)\.\d+$/.exec(version ?? '');
  if (!m) return false;
  const min = MINIMUM[Number(m[1])];
  return min !== undefined && Number(m[2]) >= min;
}

/** The version of the `bullmq` that made `queue` (`'bullmq:6.7.0'` in its meta values), or undefined. */
export function bullmqVersion(queue: Queue): string | undefined {
  try {
    const v = (queue as unknown as { metaValues?: Record<string, unknown> }).metaValues?.version;
    return typeof v === 'string' ? v.slice(v.lastIndexOf(':') + 1) : undefined;
  } catch {
    return undefined;
  }
}

type Connection = Record<string, unknown>;
const fn = (c: Connection, name: string) => typeof c[name] === 'function';

/**
 * Refuses a `connection` that is not ioredis: a client instance (BullMQ's own
 * test: `connect`, `disconnect`, `duplicate`) must also be ioredis'
 * (`defineCommand`, `pipeline`, `multi`); options are ioredis options.
 * Runs before the Queue is made.
 */
export function checkConnection(connection: unknown): void {
  const c = connection as Connection;
  if (!['connect', 'disconnect', 'duplicate'].every((name) => fn(c, name))) return checkKeyPrefix(c);
  if (['defineCommand', 'pipeline', 'multi'].every((name) => fn(c, name))) {
    const o = (c.options ?? {}) as Connection;
    return checkKeyPrefix(o, (o.redisOptions ?? {}) as Connection);
  }
  if (fn(c, 'sendCommand') && ('isOpen' in c || 'isReady' in c))
    throw new UnsupportedConnectionError('a node-redis client');
  if (fn(c, 'send') && 'connected' in c) throw new UnsupportedConnectionError("Bun's Redis client");
  throw new UnsupportedConnectionError('a client that is not ioredis (no defineCommand, pipeline or multi)');
}

/**
 * Refuses an ioredis `keyPrefix` (in options, a client's or a Cluster's): BullMQ
 * refuses it on a client only, and given as options its keys and the engine's
 * split between '<keyPrefix><prefix>:' and '<prefix>:' (jobs then never finish).
 */
function checkKeyPrefix(...options: Connection[]): void {
  const keyPrefix = options.map((o) => o.keyPrefix).find(Boolean);
  if (keyPrefix === undefined) return;
  throw new UnsupportedConnectionError(
    `an ioredis connection with keyPrefix ${JSON.stringify(keyPrefix)}`,
    "BullMQ does not support ioredis' keyPrefix: drop it and use the engine's `prefix` option (and the same " +
      'on your Queues and Workers) instead',
  );
}

/**
 * Refuses a queue made by an unsupported `bullmq`, or on a backend that is not
 * BullMQ's Redis one (BullMQ 6's `setDefaultBackendFactory` can make every
 * Queue a PostgreSQL one). Runs right after the Queue is made, before any I/O of the engine's.
 */
export function checkQueue(queue: Queue): void {
  const version = bullmqVersion(queue);
  if (!isSupportedBullMQ(version)) throw new UnsupportedBullMQError(version, SUPPORTED_BULLMQ);
  const getBackend = (queue as unknown as { getBackend?: () => object }).getBackend;
  if (typeof getBackend !== 'function') return; // BullMQ 5: Redis only
  const backend = getBackend.call(queue);
  const RedisBackend = (bullmq as Record<string, unknown>).RedisQueueBackend;
  const isRedis = typeof RedisBackend === 'function' ? backend instanceof RedisBackend : 'client' in backend;
  if (!isRedis) throw new UnsupportedConnectionError(`a BullMQ ${backend.constructor?.name ?? 'non-Redis'} backend`);
}

type Backend = { client: Promise<RedisClient>; promote(id: string): Promise<void> };
type Queue5 = { client: Promise<RedisClient>; scripts: { promote(id: string): Promise<void> } };

function backendOf(queue: Queue): Backend | undefined {
  const getBackend = (queue as unknown as { getBackend?: () => Backend }).getBackend;
  return typeof getBackend === 'function' ? getBackend.call(queue) : undefined;
}

/** The queue's (shared) Redis client, connected. */
export function redisClient(queue: Queue): Promise<RedisClient> {
  return backendOf(queue)?.client ?? (queue as unknown as Queue5).client;
}

/**
 * Promotes a delayed job to run now; rejects like BullMQ's `job.promote()`
 * ("... is not in the delayed state" when it is not delayed).
 */
export function promote(queue: Queue, jobId: string): Promise<void> {
  const backend = backendOf(queue);
  return backend ? backend.promote(jobId) : (queue as unknown as Queue5).scripts.promote(jobId);
}

/**
 * 1 when the job ARGV[1] (KEYS[2]) a deduplicating add returned is gone; its
 * deduplication key KEYS[1] is deleted if it still names that job and has no
 * TTL (another caller may have replaced it already). 0 when the job exists.
 */
const DROP_STALE_DEDUPLICATION = `if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('PTTL', KEYS[1]) == -1 then redis.call('DEL', KEYS[1]) end
return 1`;

/**
 * `queue.add` with a deduplication id. A job deduplicated to one that no longer
 * exists (its key outlived it) is added again once the stale key is dropped,
 * as later BullMQ 6 releases do by themselves; when another caller replaced the
 * key meanwhile, the add again returns that caller's job. Returns BullMQ's job:
 * `job.id !== opts.jobId` when it was deduplicated to a live job.
 */
export async function addDeduplicated(queue: Queue, name: string, data: unknown, opts: JobsOptions): Promise<Job> {
  const job = await queue.add(name, data, opts);
  // Stryker disable next-line ConditionalExpression: equivalent in result: without the early return, the script finds the job there and the same job is returned (one request more)
  if (!job.id || job.id === opts.jobId || !opts.deduplication) return job;
  const client = (await redisClient(queue)) as unknown as { eval(...args: unknown[]): Promise<unknown> };
  const keys = [queue.toKey(`de:${opts.deduplication.id}`), queue.toKey(job.id)];
  const gone = await client.eval(DROP_STALE_DEDUPLICATION, 2, ...keys, job.id);
  // Stryker disable next-line ConditionalExpression: equivalent in result: adding again while the job lives is deduplicated to that same job (one request more)
  return gone === 1 ? queue.add(name, data, opts) : job;
}
