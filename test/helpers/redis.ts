import { randomUUID } from 'node:crypto';
import IORedis, { type RedisOptions } from 'ioredis';

/** Where the tests' Redis is: `REDIS_URL`, else 127.0.0.1:6379. */
export function redisOptions(): { host: string; port: number; password?: string } {
  const url = process.env.REDIS_URL;
  if (!url) return { host: '127.0.0.1', port: 6379 };
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), ...(u.password ? { password: u.password } : {}) };
}

const open = new Set<IORedis>();

/** A plain client for assertions; closed by `closeClients()`. */
export function client(extra: RedisOptions = {}): IORedis {
  const c = new IORedis({ ...redisOptions(), ...extra });
  open.add(c);
  return c;
}

export async function closeClients(): Promise<void> {
  await Promise.all([...open].map((c) => c.quit().catch(() => c.disconnect())));
  open.clear();
}

/** A prefix and queue name no other test uses. */
export function isolated(): { prefix: string; queueName: string } {
  const id = randomUUID().slice(0, 8);
  return { prefix: `t-${id}`, queueName: `q-${id}` };
}

/** Deletes every key under the prefix (tests only; the library never scans). */
export async function dropPrefix(redis: IORedis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

export async function keysUnder(redis: IORedis, prefix: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out.sort();
}

/** Polls until `check` returns a truthy value, or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => Promise<T> | T, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
