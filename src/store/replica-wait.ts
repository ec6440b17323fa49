import { ReplicationUnconfirmedError } from '../errors';
import type { EngineEvents } from '../events';

/** A write that is awaited on the replicas when `waitForReplicas` is on. */
export type ReplicatedOp = EngineEvents['replicaLag']['op'];

/** `waitForReplicas`, resolved, and where a shortfall is reported. */
export interface ReplicaWaitOptions {
  replicas: number;
  timeoutMs: number;
  onLag(event: EngineEvents['replicaLag']): void;
}

/** A cluster redirection of the route key's `PERSIST`. */
const REDIRECTION = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/;

type Pipeline = Record<string, (...args: unknown[]) => Pipeline> & {
  exec(): Promise<[Error | null, unknown][] | null>;
};

/**
 * Group commit of Redis `WAIT`. Resolves once `replicas` replicas hold the
 * write that connection `madeOn` made (from `CLIENT INFO`: read in the
 * write's MULTI, or by `probe` before a write BullMQ makes itself). The writes
 * whose replies arrive in one turn of the event loop share one `WAIT`, sent
 * after all of them (Redis answers a client's commands in order, and a `WAIT`
 * counts every earlier write of its connection). The pipeline is `PERSIST` of
 * a key that never exists (a keyed write command that changes nothing: on a
 * Cluster it routes to the queue's master even with `scaleReads`),
 * `CLIENT INFO`, `WAIT`.
 *
 * ioredis may resend a pipeline whose connection closed on another
 * connection (a Cluster after a failover, a reconnected client); a `WAIT`
 * there says nothing about this write. So a write whose `WAIT` ran on
 * another connection than the write, or whose `WAIT` failed, rejects with
 * `ReplicationUnconfirmedError` (a failure its `cause`): the job is retried
 * rather than completed. A `WAIT` answered by fewer replicas is reported as
 * `replicaLag`; then no `WAIT` is sent for `10 × timeoutMs`.
 */
export class ReplicaWait {
  /** After a replica shortfall, `WAIT` is skipped until this time (ms since the epoch). */
  private skipUntil = 0;
  /** The `WAIT` not sent yet, that the writes acknowledged in this turn of the event loop join. */
  private pending: { op: ReplicatedOp; writes: number; done: Promise<string> } | undefined;

  constructor(
    private readonly opts: ReplicaWaitOptions,
    private readonly pipeline: () => Promise<Pipeline>,
    private readonly routeKey: string,
  ) {}

  /** Whether writes should be confirmed now: not in the skip window after a shortfall. */
  get active(): boolean {
    // Stryker disable next-line EqualityOperator: equivalent: `>` differs only in the one millisecond skipUntil names
    return Date.now() >= this.skipUntil;
  }

  async confirm(op: ReplicatedOp, madeOn: string | undefined): Promise<void> {
    if (!this.active || madeOn === undefined) return;
    const w = this.opts;
    let batch = this.pending;
    if (!batch) {
      const opened: { op: ReplicatedOp; writes: number; done: Promise<string> } = {
        op,
        writes: 0,
        // (runs a turn later: by then `opened` holds every write of this turn)
        done: new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
          this.pending = undefined;
          const p = await this.pipeline();
          const replies = (await p.persist!(this.routeKey).client!('INFO').wait!(w.replicas, w.timeoutMs).exec()) ?? [];
          // the route key never exists: during a slot migration its PERSIST answers ASK (MOVED once the
          // slot has moved on) while CLIENT INFO and WAIT still ran where ioredis sent the pipeline.
          // That redirection says nothing about the write: the connection check below decides. (Only
          // PERSIST can be redirected: Redis checks the slot of a command with keys only.)
          for (const [err] of replies) if (err && !REDIRECTION.test(err.message)) throw err;
          const acked = Number(replies[2]?.[1]);
          if (acked < w.replicas) {
            const skipMs = 10 * w.timeoutMs;
            this.skipUntil = Date.now() + skipMs;
            w.onLag({ op: opened.op, writes: opened.writes, acked, wanted: w.replicas, skipMs });
          }
          return connectionOf(replies[1]?.[1]);
        }),
      };
      this.pending = batch = opened;
    }
    batch.writes++;
    // a WAIT that failed (its connection closed, a timeout) confirms nothing either
    const ranOn = await batch.done.catch((error: unknown) => {
      throw new ReplicationUnconfirmedError(op, error);
    });
    if (ranOn !== madeOn) throw new ReplicationUnconfirmedError(op);
  }
}

/** One connection, from a `CLIENT INFO` reply: its id and both ends of its socket. */
export function connectionOf(info: unknown): string {
  const text = String(info);
  const field = (name: string) => new RegExp(`(?:^| )${name}=(\\S*)`).exec(text)?.[1];
  return `${field('id')} ${field('addr')} ${field('laddr')}`;
}
