import type { Queue } from 'bullmq';
import { redisClient } from '../bullmq/adapter';
import { checkPermissions, defineCommands, quitOrDrop, type Client } from './client';
import { timeMs, type RedisClock } from './clock';
import type { StoreKeys } from './keys';

/**
 * The store's connections: the queue's client (opened once: the engine's scripts defined, the
 * permissions checked, this host's clock read against Redis') and, with `waitForReplicas`, the
 * connection of its own that lock renewals use, closed with the store.
 */
export class StoreConnections {
  private clientPromise: Promise<Client> | undefined;
  private renewPromise: Promise<Client> | undefined;

  constructor(
    private readonly queue: Queue,
    private readonly keys: StoreKeys,
    /** `waitForReplicas` is on: the permission check includes `WAIT`, renewals get their own connection. */
    private readonly replicas: boolean,
    private readonly clock: RedisClock,
  ) {}

  /**
   * The queue's client, with the engine's scripts defined on it. The first
   * call checks that the connection's Redis user may run every command the
   * engine needs (`MissingPermissionError` naming those it may not): refused
   * at start-up, not half-way through a deferral. A refusal is not kept: the
   * next call checks again (and is ready once the user was granted them).
   */
  client(): Promise<Client> {
    this.clientPromise ??= (async () => {
      const c = defineCommands((await redisClient(this.queue)) as unknown as Client);
      await checkPermissions(c, this.keys, this.replicas);
      // this host's clock against Redis', before the first wake-up is judged by it
      const sentAt = Date.now();
      this.clock.read(timeMs((await c.time!()) as [string, string]), sentAt);
      return c;
    })().catch((error: unknown) => {
      // tried again at the next call: a permission granted meanwhile, a replica promoted, Redis up
      this.clientPromise = undefined;
      throw error;
    });
    return this.clientPromise;
  }

  /**
   * The connection lock renewals use. With `waitForReplicas`, a connection of
   * its own: a `WAIT` blocks the connection it runs on for up to `timeoutMs`,
   * and no `WAIT` may delay a renewal until the lock expires.
   */
  renewClient(): Promise<Client> {
    if (!this.replicas) return this.client();
    this.renewPromise ??= (async () => {
      const c = await this.client();
      const dup = c.isCluster
        ? c.duplicate!(undefined, { redisOptions: { ...((c.options?.redisOptions as object) ?? {}) } })
        : c.duplicate!();
      return defineCommands(dup);
    })();
    return this.renewPromise;
  }

  /** Closes the connections opened here (the renewal connection). */
  async close(): Promise<void> {
    const p = this.renewPromise;
    this.renewPromise = undefined;
    // (an ioredis client, which has both; it does not fail: only a held lock is renewed, and a lock
    // is taken on the queue's client, opened already)
    if (p) await quitOrDrop((await p) as { quit(): Promise<unknown>; disconnect(): void });
  }
}
