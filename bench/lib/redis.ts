import { randomUUID } from 'node:crypto';
import type { ConnectionOptions } from 'bullmq';
import IORedis, { type RedisOptions } from 'ioredis';
import { parseInfo } from '../../test/cluster/harness';

/** Connection options for `REDIS_URL` (set by scripts/with-redis.sh), else 127.0.0.1:6379. */
export function redisOptions(): RedisOptions {
  const url = process.env.REDIS_URL;
  if (!url) return { host: '127.0.0.1', port: 6379 };
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), ...(u.password ? { password: u.password } : {}) };
}

/** Options BullMQ Workers accept (they refuse a client without `maxRetriesPerRequest: null`). */
export function bullConnection(): ConnectionOptions {
  return {
    ...redisOptions(),
    maxRetriesPerRequest: null,
    ...(process.env.BENCH_AUTOPIPELINE ? { enableAutoPipelining: true } : {}),
  } as ConnectionOptions;
}

const open = new Set<IORedis>();

/** A plain client for measuring; closed by `closeClients()`. */
export function client(): IORedis {
  const c = new IORedis(redisOptions());
  open.add(c);
  return c;
}

export async function closeClients(): Promise<void> {
  await Promise.all([...open].map((c) => c.quit().catch(() => c.disconnect())));
  open.clear();
}

/** A prefix no other run or test uses: one per scenario (and per variant where they must not share keys). */
export function benchPrefix(scenario: string): string {
  return `bench-${scenario}-${randomUUID().slice(0, 8)}`;
}

/** Deletes every key under the prefix (SCAN + UNLINK; never FLUSHDB). Returns the count. */
export async function dropPrefix(redis: IORedis, prefix: string): Promise<number> {
  let cursor = '0';
  let n = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 5000);
    cursor = next;
    if (keys.length > 0) n += await redis.unlink(...keys);
  } while (cursor !== '0');
  return n;
}

/** `INFO commandstats` as command -> calls (commands run inside Lua are counted too). */
export async function commandCalls(redis: IORedis): Promise<Record<string, number>> {
  const info = parseInfo(await redis.info('commandstats'));
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(info)) {
    const m = /calls=(\d+)/.exec(v);
    if (k.startsWith('cmdstat_') && m) out[k.slice('cmdstat_'.length)] = Number(m[1]);
  }
  return out;
}

/** Commands the measuring itself issues; left out of every count. */
const OWN = new Set([
  'info',
  'config|resetstat',
  'config|get',
  'ping',
  'echo',
  'monitor',
  'memory|usage',
  'scan',
  'dbsize',
]);

export interface RedisCounts {
  /** Every command Redis ran, those inside Lua scripts and MULTI included. */
  commands: number;
  /** Top-level script calls (EVALSHA/EVAL). */
  scripts: number;
  /** Writes: `rdb_changes_since_last_save` delta (keys changed, Redis' own dirty counter). */
  writes: number;
  byCommand: Record<string, number>;
}

/**
 * Counts what Redis does between `start()` and `stop()`: CONFIG RESETSTAT
 * zeroes `INFO commandstats`; writes are the delta of Redis' dirty counter
 * (`rdb_changes_since_last_save`). Both are server-wide: run the bench alone
 * on its Redis.
 */
export class RedisCounter {
  private dirty0 = 0;
  constructor(private readonly redis: IORedis) {}

  async start(): Promise<void> {
    await this.redis.config('RESETSTAT');
    this.dirty0 = await dirty(this.redis);
  }

  async stop(): Promise<RedisCounts> {
    const writes = (await dirty(this.redis)) - this.dirty0;
    const byCommand = await commandCalls(this.redis);
    for (const k of OWN) delete byCommand[k];
    const commands = Object.values(byCommand).reduce((a, b) => a + b, 0);
    const scripts = (byCommand.evalsha ?? 0) + (byCommand.eval ?? 0);
    return { commands, scripts, writes, byCommand };
  }
}

async function dirty(redis: IORedis): Promise<number> {
  return Number(parseInfo(await redis.info('persistence')).rdb_changes_since_last_save ?? 0);
}

export async function usedMemory(redis: IORedis): Promise<number> {
  return Number(parseInfo(await redis.info('memory')).used_memory ?? 0);
}

/**
 * Counts client round trips with MONITOR: every command a client sends is one
 * request it waits on, except the commands between MULTI and EXEC, which
 * ioredis sends as one pipeline (one round trip). Commands run by Lua scripts
 * show up with source `lua` and are not round trips.
 */
export class RoundTripCounter {
  private mon: IORedis | undefined;
  private inMulti = new Set<string>();
  private sentinel = '';
  private seen: (() => void) | undefined;
  roundTrips = 0;
  byCommand: Record<string, number> = {};

  constructor(private readonly redis: IORedis) {}

  async start(): Promise<void> {
    this.mon = await this.redis.monitor();
    this.mon.on('monitor', (_time: string, args: string[], source: string) => {
      const cmd = String(args[0] ?? '').toLowerCase();
      if (cmd === 'echo' && args[1] === this.sentinel) {
        this.seen?.();
        return;
      }
      if (source === 'lua' || source.startsWith('lua')) return;
      if (this.inMulti.has(source)) {
        if (cmd === 'exec' || cmd === 'discard') this.inMulti.delete(source);
        return;
      }
      if (cmd === 'multi') this.inMulti.add(source);
      if (OWN.has(cmd) || cmd === 'config' || cmd === 'info' || cmd === 'client') return;
      this.roundTrips += 1;
      this.byCommand[cmd] = (this.byCommand[cmd] ?? 0) + 1;
    });
    // MONITOR starts streaming after its reply; make sure it is live before counting.
    await this.flush();
    this.reset();
  }

  reset(): void {
    this.roundTrips = 0;
    this.byCommand = {};
  }

  /** Waits until every command sent before this call has been seen. */
  async flush(): Promise<void> {
    this.sentinel = `bench-sentinel-${randomUUID()}`;
    const seen = new Promise<void>((resolve) => (this.seen = resolve));
    await this.redis.echo(this.sentinel);
    await seen;
  }

  async stop(): Promise<void> {
    this.mon?.disconnect();
    this.mon = undefined;
  }
}

export { parseInfo };
