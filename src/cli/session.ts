import type { Cluster, Redis } from 'ioredis';
import type { DispatchEngine } from '../engine';
import { resolveOptions } from '../options';
import { CliError, UsageError } from './errors';
import { checkDispatchQueue } from './guard';
import { ioReader, QueueKeys, type Reader } from '../store/reader';
import { redactUrl } from './redact';

export interface GlobalOptions {
  redis: string;
  queue: string;
  prefix: string;
  json: boolean;
  cluster: boolean;
  timeout: number;
}

/** What a command gets: a Reader, the queue's keys, and the engine (created on first use: writes only). */
export interface Session {
  redis: Redis | Cluster;
  reader: Reader;
  keys: QueueKeys;
  engine(): Promise<DispatchEngine>;
}

/** `MOVED`, `ASK` or `CLUSTERDOWN`: the node is part of a Redis Cluster. */
const CLUSTER_REPLY = /\b(MOVED|ASK|CLUSTERDOWN)\b/;
const TIMED_OUT = /Command timed out|timed? ?out/i;

async function neverDispatch(): Promise<never> {
  throw new Error('The CLI never dispatches');
}

/** Cluster nodes from `--redis`: one URL, or several separated by commas; credentials and TLS from the first. */
function clusterNodes(url: string) {
  const urls = url.split(',').map((u) => new URL(u.trim()));
  const first = urls[0] as URL;
  const auth = {
    ...(first.username && { username: decodeURIComponent(first.username) }),
    ...(first.password && { password: decodeURIComponent(first.password) }),
    ...(first.searchParams.get('password') && { password: first.searchParams.get('password') as string }),
    ...(first.protocol === 'rediss:' && { tls: {} }),
  };
  return { nodes: urls.map((u) => ({ host: u.hostname, port: Number(u.port || 6379) })), auth };
}

async function open(g: GlobalOptions): Promise<{ redis: Redis | Cluster; lastError: () => Error | undefined }> {
  const { default: IORedis, Cluster } = await import('ioredis');
  const t = g.timeout;
  // disconnectTimeout: a socket that never closes (a frozen server, a refused connect) is destroyed soon
  const common = { connectTimeout: t, commandTimeout: t, maxRetriesPerRequest: 1, disconnectTimeout: 200 };
  let redis: Redis | Cluster;
  if (g.cluster) {
    let parsed;
    try {
      parsed = clusterNodes(g.redis);
    } catch {
      throw new UsageError(`Cannot read --redis ${JSON.stringify(redactUrl(g.redis))} as cluster node URLs`);
    }
    redis = new Cluster(parsed.nodes, {
      lazyConnect: true,
      redisOptions: { ...common, ...parsed.auth },
      clusterRetryStrategy: () => null,
      slotsRefreshTimeout: t,
      maxRedirections: 16,
    });
  } else {
    redis = new IORedis(g.redis, { ...common, lazyConnect: true, retryStrategy: () => null });
  }
  let lastError: Error | undefined;
  redis.on('error', (error: Error) => {
    lastError = error; // reported through the failed command
  });
  return { redis, lastError: () => lastError };
}

/** Resolves with `promise`, or rejects after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Connects (every command bounded by `--timeout`), checks the queue exists and
 * is a dispatch queue, runs `run`, and closes everything, whatever happens.
 * Errors come out as UsageError (exit 2) or CliError (exit 1, maybe a hint).
 */
export async function withSession<T>(g: GlobalOptions, run: (s: Session) => Promise<T>): Promise<T> {
  const at = redactUrl(g.redis);
  const silent = () => new CliError(`Redis at ${at} did not answer within ${g.timeout} ms (--timeout ${g.timeout})`);
  const clusterHint = (e: Error) =>
    !g.cluster && CLUSTER_REPLY.test(e.message)
      ? 'hint: this node is part of a Redis Cluster and does not serve the queue; add --cluster'
      : undefined;
  resolveOptions({ connection: {}, queueName: g.queue, prefix: g.prefix, executor: neverDispatch });
  const { redis, lastError } = await open(g);
  let engine: DispatchEngine | undefined;
  try {
    try {
      await within(redis.connect(), g.timeout + 1000);
    } catch (error) {
      const cause = lastError() ?? (error as Error);
      if (TIMED_OUT.test(cause.message)) throw silent();
      throw new CliError(`Cannot connect to Redis at ${at}: ${cause.message}`, clusterHint(cause));
    }
    const keys = new QueueKeys(g.prefix, g.queue);
    const reader = ioReader(redis as unknown as Parameters<typeof ioReader>[0]);
    // BullMQ's Queue writes `<prefix>:<queue>:meta` when it is missing: check first, so a
    // mistyped name is reported instead of creating an empty queue.
    const [exists] = await reader.run([['exists', keys.meta]]);
    if (exists === 0) {
      throw new UsageError(
        `No BullMQ queue ${JSON.stringify(g.queue)} with prefix ${JSON.stringify(g.prefix)} at ${at} ` +
          `(no key ${keys.meta}); check --queue and --prefix`,
      );
    }
    await checkDispatchQueue(reader, keys, `queue ${JSON.stringify(g.queue)}, prefix ${JSON.stringify(g.prefix)}`);
    return await run({
      redis,
      reader,
      keys,
      engine: async () => {
        const { createDispatchEngine } = await import('../engine');
        engine ??= createDispatchEngine({
          connection: redis,
          queueName: g.queue,
          prefix: g.prefix,
          executor: neverDispatch,
        });
        engine.queue.on('error', () => undefined);
        return engine;
      },
    });
  } catch (error) {
    if (error instanceof UsageError || error instanceof CliError || !(error instanceof Error)) throw error;
    if (error.message === 'Command timed out') throw silent();
    const hint = clusterHint(error);
    throw hint ? new CliError(error.message, hint) : error;
  } finally {
    await engine?.close().catch(() => undefined);
    redis.disconnect();
  }
}
