import { Job, type Queue } from 'bullmq';
import * as lua from './lua/scripts';
import { ReplicationUnconfirmedError } from './errors';
import type { EngineEvents } from './events';
import { jobIdOfLicence } from './job-data';
import { stageIdOfJobId } from './stage-ref';

/**
 * The engine's Redis state for one queue. Every key lives under
 * `<prefix>:<queueName>:`, like BullMQ's own:
 *
 *   sd:deferred:<stageId>  marker: value = wake-up job id, PX = the window
 *   sd:inflight:<stageId>  in-flight dispatch lock: value = token
 *   sd:licences            sorted set of wake-up ids, one per stage at most
 *   de:<stageId>           BullMQ deduplication key of the stage's enqueued job
 */
// ioredis commands defined below; the client is BullMQ's adapter around ioredis.
type Client = Record<string, (...args: unknown[]) => Promise<unknown>> & {
  defineCommand(name: string, def: { numberOfKeys?: number; lua: string }): void;
  multi(): Multi;
  pipeline(): Multi;
};
type Multi = Record<string, (...args: unknown[]) => Multi> & { exec(): Promise<[Error | null, unknown][] | null> };

const COMMANDS = {
  // variable key count: the first argument is the number of keys
  sdBatch: { keys: undefined, lua: lua.BATCH },
  sdDefer: { keys: 5, lua: lua.DEFER },
  sdExtend: { keys: 1, lua: lua.EXTEND },
  sdProbe: { keys: 3, lua: lua.PROBE },
  sdCancel: { keys: 4, lua: lua.CANCEL },
  sdFail: { keys: 1, lua: lua.FAIL },
  sdClear: { keys: undefined, lua: lua.CLEAR },
} as const;

export type BeginOutcome =
  | { kind: 'deferred'; wakeUpJobId: string; remainingMs: number }
  | { kind: 'in_flight' }
  | { kind: 'stale' }
  | { kind: 'cancelled' }
  | { kind: 'locked'; licence: string | null };

export type ProbeOutcome =
  | { kind: 'deferred'; remainingMs: number }
  | { kind: 'in_flight' }
  | { kind: 'pending'; licence: string }
  | { kind: 'none' };

/** How many licences one clear script call handles. */
const CLEAR_BATCH = 500;
/** How many begin/release operations one batch script call handles. */
const MAX_BATCH = 256;

/** A write that is awaited on the replicas when `waitForReplicas` is on. */
export type ReplicatedOp = EngineEvents['replicaLag']['op'];

/** `waitForReplicas`, resolved, and where a shortfall is reported. */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
  onLag(event: EngineEvents['replicaLag']): void;
}

interface Op {
  keys: string[];
  args: (string | number)[];
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

export class DeferralStore {
  private readonly base: string;
  private clientPromise: Promise<Client> | undefined;
  private queued: Op[] = [];
  private flushImmediate: NodeJS.Immediate | undefined;
  /** After a replica shortfall, `WAIT` is skipped until this time (ms since the epoch). */
  private skipWaitUntil = 0;
  /** The `WAIT` not sent yet, that the writes acknowledged in this turn of the event loop join. */
  private pendingWait: { op: ReplicatedOp; writes: number; done: Promise<string> } | undefined;

  constructor(
    readonly queue: Queue,
    private readonly replicaWait: ReplicaWait | false = false,
  ) {
    this.base = `${queue.opts.prefix ?? 'bull'}:${queue.name}:`;
  }

  markerKey(sid: string): string {
    return `${this.base}sd:deferred:${sid}`;
  }
  lockKey(sid: string): string {
    return `${this.base}sd:inflight:${sid}`;
  }
  get indexKey(): string {
    return `${this.base}sd:licences`;
  }
  /** Never written: `PERSIST` on it routes a pipeline to the queue's master and changes nothing. */
  get routeKey(): string {
    return `${this.base}sd:route`;
  }
  dedupKey(sid: string): string {
    return `${this.base}de:${sid}`;
  }
  jobKey(jobId: string): string {
    return `${this.base}${jobId}`;
  }

  client(): Promise<Client> {
    this.clientPromise ??= (async () => {
      const client = (await this.queue.getBackend().client) as unknown as Client;
      for (const [name, def] of Object.entries(COMMANDS)) {
        if (typeof client[name] !== 'function') client.defineCommand(name, { numberOfKeys: def.keys, lua: def.lua });
      }
      return client;
    })();
    return this.clientPromise;
  }

  /** `kind`: 'w' a wake-up job, 'r' a job added by `enqueue`, '' a direct call or a job added by hand. */
  async begin(
    sid: string,
    token: string,
    lockMs: number,
    ownJobId: string,
    kind: 'w' | 'r' | '',
  ): Promise<BeginOutcome> {
    const r = (await this.batched(
      [this.markerKey(sid), this.lockKey(sid), this.dedupKey(sid)],
      ['b', sid, token, lockMs, ownJobId, kind],
    )) as [number, string?, number?];
    switch (r[0]) {
      case 1:
        return { kind: 'deferred', wakeUpJobId: r[1] as string, remainingMs: Math.max(0, Number(r[2])) };
      case 2:
        return { kind: 'in_flight' };
      case 3:
        return { kind: 'stale' };
      case 4:
        return { kind: 'cancelled' };
      default:
        return { kind: 'locked', licence: r[1] ? r[1] : null };
    }
  }

  /**
   * Queues a begin or release operation; everything queued in one turn of the
   * event loop goes to Redis as one `BATCH` script call, in order.
   */
  private batched(keys: string[], args: (string | number)[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queued.push({ keys, args, resolve, reject });
      if (this.flushImmediate === undefined) this.flushImmediate = setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const ops = this.queued;
    this.queued = [];
    this.flushImmediate = undefined;
    for (let i = 0; i < ops.length; i += MAX_BATCH) {
      const chunk = ops.slice(i, i + MAX_BATCH);
      const keys = [this.indexKey];
      const args: (string | number)[] = [chunk.length];
      for (const op of chunk) {
        keys.push(...op.keys);
        args.push(...op.args);
      }
      try {
        const c = await this.client();
        const replies = (await c.sdBatch!(keys.length, ...keys, ...args)) as unknown[];
        chunk.forEach((op, j) => op.resolve(replies[j]));
      } catch (error) {
        for (const op of chunk) op.reject(error);
      }
    }
  }

  /**
   * Records a deferral and adds its wake-up in one MULTI: the marker, the
   * licence and the delayed job exist together or not at all. When the
   * dispatch was cancelled (or lost its lock) meanwhile, the wake-up just
   * added is removed again; if that removal is lost to a crash, the wake-up
   * holds no licence and does nothing when it runs.
   */
  async defer(
    sid: string,
    token: string,
    wakeUp: Job,
    windowMs: number,
    logLine: string,
  ): Promise<{ recorded: boolean; cancelled: boolean; revoked: string[] }> {
    const results = await this.transaction('defer', async (m) => {
      m.sdDefer!(
        this.lockKey(sid),
        this.markerKey(sid),
        this.indexKey,
        `${this.jobKey(wakeUp.id as string)}:logs`,
        this.dedupKey(sid),
        sid,
        token,
        wakeUp.id,
        windowMs,
        logLine,
      );
      await wakeUp.addJob(m as never);
    });
    for (const [err] of results) if (err) throw err;
    const r = results[0]![1] as [number, ...(string | number)[]];
    if (r[0] === 1) return { recorded: true, cancelled: false, revoked: r.slice(1) as string[] };
    await this.removeJobs([wakeUp.id as string]);
    return { recorded: false, cancelled: r[1] === 1, revoked: [] };
  }

  async release(sid: string, token: string, revoke: boolean): Promise<{ cancelled: boolean; revoked: string[] }> {
    const r = (await this.batched([this.lockKey(sid)], ['r', sid, token, revoke ? '1' : '0'])) as [number, ...string[]];
    return { cancelled: r[0] === 1, revoked: r.slice(1) as string[] };
  }

  /** Marks the wake-up's licence as failed for good (`?`): enqueue may add a job; a retry by hand may run it. */
  async markFailed(sid: string, jobId: string): Promise<void> {
    await this.transactionOf('fail', (m) => m.sdFail!(this.indexKey, sid, jobId));
  }

  async extend(sid: string, token: string, lockMs: number): Promise<boolean> {
    const c = await this.client();
    return (await c.sdExtend!(this.lockKey(sid), token, lockMs)) === 1;
  }

  /**
   * What an enqueue would find. With `waitForReplicas`, the same pipeline reads
   * `CLIENT INFO` (`connection`): the connection BullMQ's add will then be made
   * on, for `replicated` to check the add's `WAIT` against.
   */
  async probe(sid: string): Promise<ProbeOutcome & { connection?: string }> {
    const c = await this.client();
    const keys = [this.markerKey(sid), this.lockKey(sid), this.indexKey, sid];
    let r: [number, unknown?];
    let connection: string | undefined;
    if (this.awaiting) {
      const replies = (await c.pipeline().sdProbe!(...keys).client!('INFO').exec()) ?? [];
      for (const [err] of replies) if (err) throw err;
      r = replies[0]![1] as [number, unknown?];
      connection = connectionOf(replies[1]![1]);
    } else {
      r = (await c.sdProbe!(...keys)) as [number, unknown?];
    }
    const outcome: ProbeOutcome =
      r[0] === 1
        ? { kind: 'deferred', remainingMs: Math.max(0, Number(r[1])) }
        : r[0] === 2
          ? { kind: 'in_flight' }
          : r[0] === 3
            ? { kind: 'pending', licence: r[1] as string }
            : { kind: 'none' };
    return connection === undefined ? outcome : { ...outcome, connection };
  }

  async isDeferred(sid: string): Promise<boolean> {
    const c = await this.client();
    return (await c.exists!(this.markerKey(sid))) === 1;
  }

  /**
   * Whether a licence still stands for a pending wake-up. A licence whose job
   * was removed by hand is dropped; one whose job failed for good (a BullMQ
   * failure the engine did not see, e.g. stalled too often) is not pending.
   */
  async licenceIsLive(licence: string): Promise<boolean> {
    const id = jobIdOfLicence(licence);
    const state = await this.queue.getJobState(id);
    if (state === 'unknown') {
      const c = await this.client();
      await c.zrem!(this.indexKey, licence);
      return false;
    }
    return state !== 'failed' && state !== 'completed';
  }

  async cancel(sid: string): Promise<{ hadDeferral: boolean; inFlight: boolean; removedJobs: number }> {
    const r = (await this.transactionOf('cancel', (m) =>
      m.sdCancel!(this.markerKey(sid), this.lockKey(sid), this.indexKey, this.dedupKey(sid), sid),
    )) as [number, number, string, ...string[]];
    // a failed wake-up (`?`) stays as the record of its failure; without its licence a retry by hand does nothing
    const ids = (r.slice(3) as string[]).filter((l) => !l.endsWith('?')).map(jobIdOfLicence);
    if (r[2]) ids.push(r[2]);
    const removedJobs = await this.removeJobs(ids);
    return { hadDeferral: r[0] === 1, inFlight: r[1] === 1, removedJobs };
  }

  /** Licences of every stage whose id starts with `prefix` (an index range, not a scan). */
  async licencesIn(prefix: string): Promise<string[]> {
    const c = await this.client();
    return (await c.zrangebylex!(this.indexKey, `[${prefix}`, `[${prefix}\xff`)) as string[];
  }

  /** Ends every deferral in the scope prefix; their wake-ups are promoted to run now. Returns the count. */
  async clear(prefix: string): Promise<string[]> {
    const licences = await this.licencesIn(prefix);
    const cleared: string[] = [];
    for (let i = 0; i < licences.length; i += CLEAR_BATCH) {
      const batch = licences.slice(i, i + CLEAR_BATCH);
      const keys = [this.indexKey];
      for (const lic of batch) {
        const id = jobIdOfLicence(lic);
        keys.push(this.markerKey(stageIdOfJobId(id)), this.jobKey(id));
      }
      const ids = (await this.transactionOf('clear', (m) => m.sdClear!(keys.length, ...keys, ...batch))) as string[];
      cleared.push(...ids);
    }
    await Promise.all(
      cleared.map((id) =>
        this.queue
          .getBackend()
          .promote(id)
          .catch(() => undefined),
      ),
    );
    return cleared;
  }

  /** `waitForReplicas` when it applies now: on, and not in the skip window after a shortfall. */
  private get awaiting(): ReplicaWait | undefined {
    return this.replicaWait && Date.now() >= this.skipWaitUntil ? this.replicaWait : undefined;
  }

  /**
   * Runs `build`'s commands as one MULTI and returns EXEC's replies as
   * `[error, value]` pairs. With `waitForReplicas`, the MULTI also reads
   * `CLIENT INFO` (which connection ran the write), and the call returns once
   * the replicas hold the write.
   */
  private async transaction(op: ReplicatedOp, build: (m: Multi) => unknown): Promise<[Error | null, unknown][]> {
    const c = await this.client();
    const wait = this.awaiting;
    const m = c.multi();
    await build(m);
    if (wait) m.client!('INFO');
    const results = await m.exec();
    if (!results) throw new Error('The transaction was discarded');
    if (wait) {
      const [err, info] = results.pop()!;
      if (err) throw err;
      await this.replicated(op, connectionOf(info));
    }
    return results;
  }

  /**
   * Resolves once `waitForReplicas.replicas` replicas hold the write that
   * connection `madeOn` made (from `CLIENT INFO`: read in the write's MULTI,
   * or by `probe` before a write BullMQ makes itself). Group commit: the writes whose replies arrive in
   * one turn of the event loop share one `WAIT`, sent after all of them
   * (Redis answers a client's commands in order, and a `WAIT` counts every
   * earlier write of its connection). The pipeline is `PERSIST` of a key that
   * never exists (a keyed write command that changes nothing: on a Cluster it
   * routes to the queue's master even with `scaleReads`), `CLIENT INFO`,
   * `WAIT`.
   *
   * ioredis may resend a pipeline whose connection closed on another
   * connection (a Cluster after a failover, a reconnected client); a `WAIT`
   * there says nothing about this write. So a write whose `WAIT` ran on
   * another connection than the write, or whose `WAIT` failed, rejects with
   * `ReplicationUnconfirmedError` or the error: the job is retried rather than
   * completed. A `WAIT` answered by fewer replicas is reported as
   * `replicaLag`; then no `WAIT` is sent for `10 × timeoutMs`.
   */
  async replicated(op: ReplicatedOp, madeOn: string | undefined): Promise<void> {
    const w = this.awaiting;
    if (!w || madeOn === undefined) return;
    let batch = this.pendingWait;
    if (!batch) {
      const opened = { op, writes: 0, done: Promise.resolve('') };
      opened.done = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
        this.pendingWait = undefined;
        const c = await this.client();
        const replies =
          (await c.pipeline().persist!(this.routeKey).client!('INFO').wait!(w.replicas, w.timeoutMs).exec()) ?? [];
        for (const [err] of replies) if (err) throw err;
        const acked = Number(replies[2]?.[1]);
        if (acked < w.replicas) {
          const skipMs = 10 * w.timeoutMs;
          this.skipWaitUntil = Date.now() + skipMs;
          w.onLag({ op: opened.op, writes: opened.writes, acked, wanted: w.replicas, skipMs });
        }
        return connectionOf(replies[1]?.[1]);
      });
      this.pendingWait = batch = opened;
    }
    batch.writes++;
    if ((await batch.done) !== madeOn) throw new ReplicationUnconfirmedError(op);
  }

  /** A transaction of one command: its reply, or its error thrown. */
  private async transactionOf(op: ReplicatedOp, build: (m: Multi) => unknown): Promise<unknown> {
    const [err, reply] = (await this.transaction(op, build))[0] ?? [new Error('The transaction had no reply')];
    if (err) throw err;
    return reply;
  }

  /** Removes jobs by id, best effort: a job that is active (locked) stays, and does nothing without its licence. */
  async removeJobs(ids: readonly string[]): Promise<number> {
    const codes = await Promise.all(ids.map((id) => this.queue.remove(id).catch(() => 0)));
    return codes.filter((code) => code === 1).length;
  }

  /** Marker value, remaining ms and job data of each licence (one pipeline). */
  async inspect(
    licences: readonly string[],
  ): Promise<{ id: string; marker: string | null; pttl: number; data: string | null }[]> {
    if (licences.length === 0) return [];
    const c = await this.client();
    const p = c.pipeline();
    const ids = licences.map(jobIdOfLicence);
    for (const id of ids) {
      const m = this.markerKey(stageIdOfJobId(id));
      p.get!(m).pttl!(m).hget!(this.jobKey(id), 'data');
    }
    const res = (await p.exec()) ?? [];
    return ids.map((id, i) => ({
      id,
      marker: (res[3 * i]?.[1] as string | null) ?? null,
      pttl: Number(res[3 * i + 1]?.[1] ?? -2),
      data: (res[3 * i + 2]?.[1] as string | null) ?? null,
    }));
  }
}

export { Job };

/** One connection, from a `CLIENT INFO` reply: its id and both ends of its socket. */
function connectionOf(info: unknown): string {
  const text = String(info);
  const field = (name: string) => new RegExp(`(?:^| )${name}=(\\S*)`).exec(text)?.[1] ?? '';
  return `${field('id')} ${field('addr')} ${field('laddr')}`;
}
