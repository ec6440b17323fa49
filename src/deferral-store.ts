import { Job, type Queue } from 'bullmq';
import { Batcher } from './store/batch';
import { beginOp, readBegin, type BeginOutcome, type BeginRequest } from './store/begin';
import { cancelStage, removeJobs } from './store/cancel';
import { CMD, type Client } from './store/client';
import { RedisClock } from './store/clock';
import { StoreConnections } from './store/connections';
import { markJobFailed } from './store/job-marks';
import { StoreKeys } from './store/keys';
import type { StoreParts } from './store/parts';
import { probeStage, type ProbeOutcome } from './store/probe';
import { ReplicaWait, type ReplicaWaitOptions, type ReplicatedOp } from './store/replica-wait';
import { Transactions } from './store/transaction';
import { clearScope, licencesIn, promoteUnlessDeferred, promoteWakeUps, wakeStages, wokenPairs } from './store/wake';

/** What a release did: cancelled or lost, the licences it revoked, and for a success with a resource its gate and line. */
export interface Release {
  cancelled: boolean;
  lost: boolean;
  revoked: string[];
  line?: { opened: boolean; closed: boolean; woken: { sid: string; wakeUpJobId: string }[] };
}

export type { ReplicatedOp } from './store/replica-wait';
export type { ReplicaWaitOptions as ReplicaWait } from './store/replica-wait';
export type { ProbeOutcome } from './store/probe';
export type { BeginOutcome, BeginRequest } from './store/begin';

/** How many times `replacePayload` reads a job whose data other replaces keep changing. */
const REPLACE_TRIES = 10;

/**
 * The engine's Redis state for one queue (key names: `store/keys.ts`). Begin
 * and release operations of one turn of the event loop go to Redis as one
 * script call; deferrals, cancels, clears and failures are MULTI
 * transactions, confirmed on the replicas with `waitForReplicas`.
 */
/** A release's mode as `BATCH` reads it: a chain's end, a success of a stage that held nothing, a job's real failure (it holds the stage), or the lock alone. */
const RELEASE_FLAG = { end: '1', success: 'e', hold: 'h', plain: '' } as const;

export class DeferralStore {
  readonly keys: StoreKeys;
  /** The queue's client and the renewal connection. */
  private readonly connections: StoreConnections;
  /** Begin and release operations, one `BATCH` script call per turn of the event loop. */
  private readonly batch: Batcher;
  /** MULTI transactions, confirmed on the replicas with `waitForReplicas`. */
  private readonly tx: Transactions;
  private readonly replicas: ReplicaWait | undefined;
  /** What the operations in `store/` use of the store. */
  private readonly parts: StoreParts;
  /** Redis' clock minus this host's, ms, from the latest batch reply. */
  private readonly clock = new RedisClock();

  constructor(
    readonly queue: Queue,
    replicaWait: ReplicaWaitOptions | false = false,
  ) {
    // Stryker disable next-line StringLiteral: equivalent: the one caller, createDispatchEngine, always gives its Queue the resolved prefix (options.ts defaults it to 'bull')
    this.keys = new StoreKeys(queue.opts.prefix ?? 'bull', queue.name);
    this.batch = new Batcher(
      this.keys,
      () => this.client(),
      (redisMs, sentAt) => this.clock.read(redisMs, sentAt),
    );
    this.tx = new Transactions(
      () => this.client(),
      this.keys,
      () => this.replicas,
    );
    this.parts = {
      queue,
      keys: this.keys,
      tx: this.tx,
      client: () => this.client(),
      removeJobs: (ids) => this.removeJobs(ids),
      licencesIn: (prefix) => this.licencesIn(prefix),
    };
    this.replicas = replicaWait
      ? new ReplicaWait(replicaWait, async () => (await this.client()).pipeline() as never, this.keys.route)
      : undefined;
    this.connections = new StoreConnections(queue, this.keys, this.replicas !== undefined, this.clock);
  }

  markerKey(sid: string): string {
    return this.keys.marker(sid);
  }

  /** Redis' time now, ms since the epoch, as last measured (this host's clock corrected). */
  redisNow(): number {
    return this.clock.now();
  }

  /** The queue's client, with the engine's scripts defined on it (see `StoreConnections`). */
  client(): Promise<Client> {
    return this.connections.client();
  }

  /**
   * This host runs a Worker (it promotes wake-ups by its clock): `onLead` hears when its clock
   * leads Redis' by more than `limitMs`, at start-up (its clock is read at the first connect) and
   * whenever a later reading crosses the limit (see `RedisClock.watchLead`).
   */
  watchClockLead(limitMs: number, onLead: (leadMs: number) => void): void {
    this.clock.watchLead(limitMs, onLead);
    void this.client().catch(() => undefined);
  }

  /** Closes the connections the store opened itself (the renewal connection). */
  async close(): Promise<void> {
    await this.connections.close();
  }

  begin(req: BeginRequest): Promise<BeginOutcome> {
    return this.batch.run(beginOp(req), readBegin);
  }

  /**
   * Records a deferral and adds its wake-up in one MULTI: the marker, the
   * licence and the delayed job exist together or not at all. `untilMs` is
   * the window's end by Redis' clock, the wake-up's timestamp + delay. When
   * the dispatch was cancelled (or lost its lock) meanwhile, the wake-up just
   * added is removed again; if that removal is lost to a crash, the wake-up
   * holds no licence and does nothing when it runs.
   */
  async defer(
    sid: string,
    token: string,
    wakeUp: Job,
    untilMs: number,
    logLine: string,
    ownJobId: string,
    /** `wakeSeq` as the begin read it, with `seenLine` the resource (encoded) whose line's count it holds ('' none). */
    chain: { cls: 'capacity' | 'idempotent'; first: boolean; hinted?: boolean; wakeSeq: string; seenLine: string },
    gate: { resource: string; mode: 'close' | 'gated' | ''; parkMs: number } = { resource: '', mode: '', parkMs: 0 },
  ): Promise<{ recorded: boolean; cancelled: boolean; woken: boolean; closed: boolean; revoked: string[] }> {
    const k = this.keys;
    const results = await this.tx.run('defer', async (m) => {
      m[CMD.sdDefer]!(
        k.lock(sid),
        k.marker(sid),
        k.index,
        `${k.job(wakeUp.id as string)}:logs`,
        k.dedup(sid),
        ownJobId ? k.job(ownJobId) : k.lock(sid),
        sid,
        token,
        wakeUp.id,
        untilMs,
        logLine,
        ownJobId,
        k.base,
        chain.cls,
        chain.hinted
          ? 'h'
          : chain.first
            ? '1'
            : // Stryker disable next-line StringLiteral: equivalent: defer.lua tests only for 'h' and '1'; any other value is a later deferral of the chain
              '0',
        chain.wakeSeq,
        gate.resource,
        gate.mode === 'close' ? 'c' : gate.mode === 'gated' ? 'g' : '',
        gate.parkMs,
        chain.seenLine,
      );
      await wakeUp.addJob(m as never);
    });
    for (const [err] of results) if (err) throw err;
    const r = results[0]![1] as [number, ...(string | number)[]];
    if (r[0] === 1)
      return { recorded: true, cancelled: false, woken: false, closed: r[1] === 1, revoked: r.slice(2) as string[] };
    await this.removeJobs([wakeUp.id as string]);
    return {
      recorded: false,
      cancelled: r[1] === 1,
      woken: r[1] === 2,
      // Stryker disable next-line BooleanLiteral: equivalent: dispatch.ts reads `closed` only of a recorded deferral (it returns first on cancelled, woken or not recorded)
      closed: false,
      // Stryker disable next-line ArrayDeclaration: equivalent: dispatch.ts reads `revoked` only of a recorded deferral (it returns first on cancelled, woken or not recorded)
      revoked: [],
    };
  }

  /**
   * Ends an attempt that did not defer: deletes its lock and, when the chain
   * ended (`end`: a success, a bound), revokes the stage's licence (`success`:
   * a stage that held none, the lock alone); after a job's real failure
   * (`hold`), in the same step, the job takes the stage's licence while it
   * waits out its retry. An attempt that no longer holds its lock changes nothing (`lost`).
   */
  async release(
    sid: string,
    ownJobId: string,
    token: string,
    mode: 'end' | 'success' | 'hold' | 'plain',
    stalled: number | undefined = undefined,
    // Stryker disable next-line StringLiteral: equivalent: with no wake the script reads the resource only to drop the stage from that resource's line (mode end), and a line of a resource the stage never named does not hold it
    gate: { resource: string; wake?: number | string } = { resource: '' },
  ): Promise<Release> {
    const flag = RELEASE_FLAG[mode];
    const wake = gate.wake === undefined ? '' : gate.wake;
    const r = (await this.batch.run(['r', sid, ownJobId, token, flag, stalled ?? '', gate.resource, wake])) as [
      number,
      ...(string | number)[],
    ];
    const rest = r.slice(1);
    // a success of a stage with a resource: '' then whether a gate opened and the woken stages' pairs
    const at = rest.indexOf('');
    const revoked = (at < 0 ? rest : rest.slice(0, at)) as string[];
    const released: Release = { cancelled: r[0] === 1, lost: r[0] === 2, revoked };
    if (at >= 0) {
      const woken = wokenPairs(rest.slice(at + 2));
      released.line = { opened: Number(rest[at + 1]) === 1, closed: Number(rest[at + 1]) === 2, woken };
    }
    return released;
  }

  /** Promotes the wake-ups of stages a release woke from their resource's line (see `promoteWakeUps`). */
  promote(ids: readonly string[]): Promise<void> {
    return promoteWakeUps(this.parts, ids);
  }

  /** A job failed for good: its licence member gets the mark `?`; false when the job was handed on (see `markJobFailed`). */
  markFailed(sid: string, jobId: string, kept: boolean, bullToken = ''): Promise<boolean> {
    return markJobFailed(this.parts, sid, jobId, kept, bullToken);
  }

  /** Renews a lock: 'held', 'cancelled' (renewed, but a cancel marked it) or 'lost'. */
  async extend(sid: string, token: string, lockMs: number): Promise<'held' | 'cancelled' | 'lost'> {
    const c = await this.connections.renewClient();
    const r = await c[CMD.sdExtend]!(this.keys.lock(sid), token, lockMs);
    return r === 1 ? 'held' : r === 2 ? 'cancelled' : 'lost';
  }

  /** What an enqueue would find, in one script (see `probeStage`). */
  probe(sid: string): Promise<ProbeOutcome & { connection?: string }> {
    return probeStage(this.parts, this.replicas, sid);
  }

  /**
   * Replaces the payload and `buildId` (dropped when not given: they go together) of a job of the
   * stage that has not begun: the stage's wake-up (`jobId` undefined: the one its marker names)
   * or the given job. True when written (see `REPLACE`). A replace written between this one's
   * read and its write is read again, so the last write wins; after `REPLACE_TRIES` reads it
   * gives up (false: not written).
   */
  async replacePayload(sid: string, jobId: string | undefined, payload: unknown, buildId?: string): Promise<boolean> {
    const c = await this.client();
    // Stryker disable next-line StringLiteral: equivalent: the first read never matches a job's data (BullMQ stores JSON: never '', nor that text), so the script answers the data and writes nothing
    let read = '';
    // Stryker disable next-line StringLiteral: equivalent: the first call's `next` is never written (its `read` does not match, see above)
    let next = '';
    for (let i = 0; i < REPLACE_TRIES; i++) {
      const r = await c[CMD.sdReplace]!(this.keys.marker(sid), sid, this.keys.base, jobId ?? '', read, next);
      if (typeof r !== 'string') return r === 1;
      read = r;
      try {
        next = JSON.stringify({ ...(JSON.parse(r) as object), payload, buildId });
      } catch {
        // data that is not JSON: the next call's script finds it so and answers 0
      }
    }
    return false;
  }

  /**
   * Whether the stage is deferred: its marker exists and names a wake-up that exists (the probe's
   * rule). Two reads of one key each, so a Cluster's slot migration redirects them (a script of
   * several keys would be refused while the slot's keys move).
   */
  async isDeferred(sid: string): Promise<boolean> {
    const c = await this.client();
    const wakeUp = (await c.get!(this.keys.marker(sid))) as string | null;
    return wakeUp !== null && (await c.exists!(this.keys.job(wakeUp))) === 1;
  }

  /** Cancels the stage and removes the jobs that would still run (see `cancelStage`). */
  cancel(sid: string): Promise<{ hadDeferral: boolean; inFlight: boolean; removedJobs: number }> {
    return cancelStage(this.parts, sid);
  }

  /** Licences of every stage whose id starts with `prefix` (see store/wake.ts). */
  licencesIn(prefix: string): Promise<string[]> {
    return licencesIn(this.parts, prefix);
  }

  /** Ends every deferral in the scope prefix and promotes its wake-up; returns how many (see `clearScope`). */
  clear(prefix: string): Promise<number> {
    return clearScope(this.parts, prefix);
  }

  /** Capacity has returned: ends up to `limit` capacity deferrals and promotes their wake-ups (see `wakeStages`). */
  wake(
    limit: number,
    scopePrefix: string,
    kind: string,
    roundRobin: boolean,
  ): Promise<{ woken: { sid: string; wakeUpJobId: string }[]; opened: boolean }> {
    return wakeStages(this.parts, limit, scopePrefix, kind, roundRobin);
  }

  /** An early wake-up just re-delayed is promoted when its marker no longer names it (see store/wake.ts). */
  promoteUnlessDeferred(sid: string, jobId: string): Promise<void> {
    return promoteUnlessDeferred(this.parts, sid, jobId);
  }

  /** With `waitForReplicas`: resolves once the replicas hold what connection `madeOn` wrote. */
  async replicated(op: ReplicatedOp, madeOn: string | undefined): Promise<void> {
    await this.replicas?.confirm(op, madeOn);
  }

  /** Removes jobs by id, best effort (see store/cancel.ts). */
  removeJobs(ids: readonly string[]): Promise<number> {
    return removeJobs(this.queue, ids);
  }
}

export { Job };
