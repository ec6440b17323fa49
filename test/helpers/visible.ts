/**
 * What a user can see of a stage, for tests that pin behaviour rather than the engine's internal
 * layout (job-hash fields, licence members, index keys): the published enqueue probe's answer
 * (src/lua/enqueue-probe.lua, docs/producers.md: the producer contract, C19), the keys the engine
 * leaves under the queue's prefix besides BullMQ's own (C27: what is kept), and BullMQ's states.
 */
import { readFileSync } from 'fs';
import { join } from 'path';
import type IORedis from 'ioredis';
import { stageId, type StageRef } from '../../src';
import { keysUnder, waitFor } from './redis';

const PROBE = readFileSync(join(__dirname, '../../src/lua/enqueue-probe.lua'), 'utf8');

interface Where {
  redis: IORedis;
  prefix: string;
  queueName: string;
  engine: { deferredStageKey(ref: StageRef): string };
}

export type ProbeAnswer =
  { kind: 'deferred'; pttl: number } | { kind: 'in_flight' } | { kind: 'pending'; jobId: string } | { kind: 'none' };

/**
 * The published enqueue probe's answer for `ref`, run as a producer in another language runs it
 * (EVAL of the shipped file, KEYS and ARGV as its header documents them): whether the stage is
 * deferred, in flight, held by a pending job (which), or free for a producer to add a job.
 */
export async function probe(h: Where, ref: StageRef): Promise<ProbeAnswer> {
  const base = `${h.prefix}:${h.queueName}:`;
  const sid = stageId(ref);
  const r = (await h.redis.eval(
    PROBE,
    3,
    h.engine.deferredStageKey(ref),
    `${base}sd:inflight:${sid}`,
    `${base}sd:licences`,
    sid,
  )) as [number, (number | string)?];
  switch (r[0]) {
    case 1:
      return { kind: 'deferred', pttl: Number(r[1]) };
    case 2:
      return { kind: 'in_flight' };
    case 3:
      return { kind: 'pending', jobId: String(r[1]) };
    default:
      return { kind: 'none' };
  }
}

/** BullMQ's own keys of a queue (its `QueueKeys`, and `repeat:`/`metrics:`/`de:` families). */
const BULLMQ_KEYS = new Set([
  'active',
  'wait',
  'waiting-children',
  'paused',
  'id',
  'delayed',
  'prioritized',
  'stalled-check',
  'completed',
  'failed',
  'stalled',
  'repeat',
  'limiter',
  'meta',
  'events',
  'pc',
  'marker',
  'de',
]);

/**
 * The keys the engine keeps under the queue's prefix (names relative to `<prefix>:<queue>:`),
 * besides BullMQ's own (its state sets, deduplication keys, job hashes and their `:lock`/`:logs`)
 * and besides queue-wide counters (a string holding an integer: the fencing counter and its
 * like, which belong to no stage). C27: a stage that is not deferred, in flight, waiting out a
 * retry or failed for good leaves nothing here; a deferred one leaves its marker
 * (`deferredStageKey`) and whatever the engine needs to run its wake-up.
 */
export async function engineKeys(h: Where): Promise<string[]> {
  const base = `${h.prefix}:${h.queueName}:`;
  const out: string[] = [];
  for (const key of await keysUnder(h.redis, h.prefix)) {
    if (!key.startsWith(base)) continue;
    const rel = key.slice(base.length);
    const head = rel.split(':')[0]!;
    if (BULLMQ_KEYS.has(rel) || ['de', 'repeat', 'metrics'].includes(head)) continue;
    // a job's hash, or a key of a job (`<id>:lock`, `<id>:logs`): job ids hold no ':' (C20)
    if ((await h.redis.type(`${base}${head}`)) === 'hash' && (await h.redis.hexists(`${base}${head}`, 'timestamp')))
      continue;
    if ((await h.redis.type(key)) === 'string' && /^-?\d+$/.test((await h.redis.get(key)) ?? '')) continue;
    out.push(rel);
  }
  return out;
}

/**
 * Where the engine still keeps stage `ref`, outside BullMQ's own keys: each engine key (see
 * {@link engineKeys}) whose name, or one of whose values (string, members, fields), names the
 * stage's public id (`stageId(ref)`, C20). `[]`: nothing of the stage is kept (C27), whatever the
 * engine's internal layout; a deferred stage shows at least its marker (`deferredStageKey`).
 */
export async function keptFor(h: Where, ref: StageRef): Promise<string[]> {
  return keptNaming(h, stageId(ref));
}

/**
 * INTERNAL ENCODING, not part of the contract (docs/contract.md, "Conflicts and implementation
 * details"): kept only where no user-visible effect tells the mechanism a test pins, and to be
 * replaced with the core rebuild. Whether the engine marked BullMQ job `jobId` superseded (its
 * job-hash field `sds`): a later run of it, but for a retry by hand, sends nothing.
 */
export async function internalMarkedSuperseded(h: Where, jobId: string): Promise<boolean> {
  return (await h.redis.hget(`${h.prefix}:${h.queueName}:${jobId}`, 'sds')) === '1';
}

/**
 * Waits until the engine keeps no key of stage `ref`'s own (named after its id: {@link keptFor}
 * without the values of shared keys): a success's release, lazy or not, has landed. A sync point
 * for tests whose next step must come after that release, which nothing user-visible reports.
 */
export async function released(h: Where, ref: StageRef, timeoutMs = 5000): Promise<void> {
  await waitFor(
    async () => (await keptFor(h, ref)).every((k) => k.includes(' ∋ ')),
    'the release of the stage landed',
    timeoutMs,
  );
}

/**
 * The engine keys (see {@link engineKeys}) whose name, or one of whose values, contains `text`
 * (a job id, say): `[]` when nothing the engine keeps names it, whatever its internal layout.
 */
export async function keptNaming(h: Where, text: string): Promise<string[]> {
  const base = `${h.prefix}:${h.queueName}:`;
  const out: string[] = [];
  for (const rel of await engineKeys(h)) {
    const key = `${base}${rel}`;
    if (rel.includes(text)) {
      out.push(rel);
      continue;
    }
    const type = await h.redis.type(key);
    const values =
      type === 'string'
        ? [(await h.redis.get(key)) ?? '']
        : type === 'zset'
          ? await h.redis.zrange(key, '0', '-1')
          : type === 'set'
            ? await h.redis.smembers(key)
            : type === 'hash'
              ? Object.entries(await h.redis.hgetall(key)).flat()
              : type === 'list'
                ? await h.redis.lrange(key, 0, -1)
                : [];
    for (const v of values) if (v.includes(text)) out.push(`${rel} ∋ ${v}`);
  }
  return out;
}
