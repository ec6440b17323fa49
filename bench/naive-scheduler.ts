import type IORedis from 'ioredis';
import type { ExecutorResult, StageRef } from '../src';

/**
 * The host side of a dispatch, as the problem statement describes it, written
 * against Redis so both schedulers pay for it the same way. Every key lives
 * under `<prefix>:host:`.
 *
 * attempt:  take a lease (SET NX PX), write dispatch metadata (HSET), move the
 *           stage's state to DISPATCHING (HSET), call the executor downstream
 *           (by default no worker is live, nothing is sent; with `downstream`,
 *           a stage it accepts is sent and its state set to DISPATCHED, HSET).
 * rollback: state back to PENDING (HSET), drop the metadata (DEL), release the
 *           lease (DEL).
 * journal:  one event in the host's journal stream (XADD).
 */
export class HostModel {
  executorCalls = 0;
  journalEvents = 0;

  constructor(
    private readonly redis: IORedis,
    private readonly prefix: string,
    /** Where a stage goes: true when it was sent (a free slot). Default: nowhere. */
    private readonly downstream: (ref: StageRef) => boolean = () => false,
  ) {}

  private key(kind: string, ref: StageRef): string {
    return `${this.prefix}:host:${kind}:${ref.scope.join('/')}/${ref.stage}`;
  }

  /** Returns false when the lease is held elsewhere. */
  async attempt(ref: StageRef, attemptId: string): Promise<ExecutorResult<string>> {
    const taken = await this.redis.set(this.key('lease', ref), attemptId, 'PX', 30_000, 'NX');
    if (taken !== 'OK') return { dispatched: false, jobs: 0, reason: 'lease_held' };
    await this.redis.hset(this.key('dispatch', ref), 'attempt', attemptId, 'startedAt', Date.now(), 'buildId', 'b1');
    await this.redis.hset(this.key('state', ref), 'state', 'DISPATCHING');
    this.executorCalls++;
    if (!this.downstream(ref)) return { dispatched: false, jobs: 0, reason: 'no_worker_available' };
    await this.redis.hset(this.key('state', ref), 'state', 'DISPATCHED');
    return { dispatched: true, jobs: 1, reason: null };
  }

  async rollback(ref: StageRef): Promise<void> {
    await this.redis.hset(this.key('state', ref), 'state', 'PENDING');
    await this.redis.del(this.key('dispatch', ref));
    await this.redis.del(this.key('lease', ref));
  }

  async journal(ref: StageRef, type: string, reason: string): Promise<void> {
    this.journalEvents++;
    await this.redis.xadd(
      `${this.prefix}:host:journal`,
      '*',
      'type',
      type,
      'stage',
      `${ref.scope.join('/')}/${ref.stage}`,
      'reason',
      reason,
    );
  }
}

/**
 * The naive scheduler: on every tick, every pending stage gets a full attempt;
 * when nothing was sent it is rolled back and the attempt journalled. Nothing
 * remembers that the stage was blocked a tick ago.
 */
export class NaiveScheduler {
  private attempts = 0;

  constructor(private readonly host: HostModel) {}

  async dispatch(ref: StageRef): Promise<void> {
    const id = `a${++this.attempts}`;
    const r = await this.host.attempt(ref, id);
    await this.host.rollback(ref);
    await this.host.journal(ref, 'dispatch_cancelled', r.reason ?? 'unknown');
  }

  /** One attempt that may send the stage (a host with a `downstream`); rolled back and journalled when not. */
  async tryDispatch(ref: StageRef): Promise<boolean> {
    const id = `a${++this.attempts}`;
    const r = await this.host.attempt(ref, id);
    if (r.dispatched) return true;
    await this.host.rollback(ref);
    await this.host.journal(ref, 'dispatch_cancelled', r.reason ?? 'unknown');
    return false;
  }
}
