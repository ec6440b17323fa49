import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import IORedis, { Cluster, type RedisOptions } from 'ioredis';

/**
 * `TEST_REDIS_CLUSTER=host:port,host:port` runs the core suites against a Redis
 * Cluster (see scripts/with-cluster.ts): clients become ioredis Clusters and
 * prefixes get a hash tag.
 */
export const clusterNodes = (process.env.TEST_REDIS_CLUSTER ?? '')
  .split(',')
  .filter(Boolean)
  .map((hp) => ({ host: hp.split(':')[0]!, port: Number(hp.split(':')[1]) }));
export const onCluster = clusterNodes.length > 0;

/** A client for the test Redis: a plain ioredis client, or a Cluster. Closed by `closeClients()`. */
export function connect(extra: RedisOptions = {}): IORedis {
  const c = onCluster
    ? (new Cluster(clusterNodes, { redisOptions: { ...extra } }) as unknown as IORedis)
    : new IORedis({ ...redisOptions(), ...extra });
  open.add(c);
  return c;
}

/** Where the tests' Redis is: `REDIS_URL`, else 127.0.0.1:6379. */
export function redisOptions(): { host: string; port: number; password?: string } {
  const url = process.env.REDIS_URL;
  if (!url) return { host: '127.0.0.1', port: 6379 };
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), ...(u.password ? { password: u.password } : {}) };
}

const open = new Set<IORedis>();

/** A client for assertions (a Cluster on a cluster run); closed by `closeClients()`. */
export function client(extra: RedisOptions = {}): IORedis {
  return connect(extra);
}

export async function closeClients(): Promise<void> {
  await Promise.all([...open].map((c) => c.quit().catch(() => c.disconnect())));
  open.clear();
}

/** A prefix and queue name no other test uses. */
export function isolated(): { prefix: string; queueName: string } {
  const id = randomUUID().slice(0, 8);
  return { prefix: onCluster ? `{t-${id}}` : `t-${id}`, queueName: `q-${id}` };
}

/**
 * A suite that calls the engine's scripts directly: its client, and `B`, the key base of a queue
 * (`<prefix>:q:`) no other test uses, fresh for each test; its keys are dropped after the test.
 */
export function scriptSuite(): { redis: IORedis; B: string } {
  const redis = client();
  const suite = { redis, B: '' };
  let prefix = '';
  beforeEach(() => {
    prefix = isolated().prefix;
    suite.B = `${prefix}:q:`;
  });
  afterEach(() => dropPrefix(redis, prefix));
  afterAll(closeClients);
  return suite;
}

/** The nodes to scan: the client itself, or every master of a Cluster. */
function scanned(redis: IORedis): IORedis[] {
  return redis instanceof Cluster ? (redis as Cluster).nodes('master') : [redis];
}

/** Closes workers and engines in order, then drops the test's keys. */
export async function closeAll(redis: IORedis, prefix: string, ...all: { close(): Promise<unknown> }[]): Promise<void> {
  for (const c of all) await c.close();
  await dropPrefix(redis, prefix);
}

/** Deletes every key under the prefix (tests only; the library never scans). */
export async function dropPrefix(redis: IORedis, prefix: string): Promise<void> {
  for (const key of await keysUnder(redis, prefix)) await redis.del(key);
}

export async function keysUnder(redis: IORedis, prefix: string): Promise<string[]> {
  const out: string[] = [];
  const pattern = `${prefix.replace(/[{}[\]*?\\]/g, (c) => `\\${c}`)}:*`;
  for (const node of scanned(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      out.push(...keys);
    } while (cursor !== '0');
  }
  return out.sort();
}

/** Polls until `check` returns a truthy value, or fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  what: string,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
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

/** A TCP port nothing listens on (Redis down): a port taken, then freed. */
export async function deadPort(): Promise<number> {
  const server = createServer(() => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
