import type IORedis from 'ioredis';
import type { RenderFarm } from './render-farm';
import { key } from './render-farm';
import type { StageRef } from '../src';

/**
 * The scheduler this plugin replaces: every tick it dispatches every pending
 * stage; a dispatch that sends nothing still takes a lease, writes dispatch
 * metadata, moves the state machine, journals an event, then rolls back.
 */
export class NaiveScheduler {
  journalEvents = 0;
  redisCommands = 0;

  constructor(
    private readonly redis: IORedis,
    private readonly ns: string,
    private readonly farm: RenderFarm,
  ) {}

  async tick(pending: StageRef[]): Promise<void> {
    for (const ref of pending) {
      const k = `${this.ns}:${key(ref)}`;
      const multi = this.redis
        .multi()
        .set(`${k}:lease`, '1', 'PX', 5000)
        .hset(`${k}:state`, 'state', 'DISPATCHING', 'at', Date.now())
        .xadd(`${this.ns}:journal`, '*', 'stage', key(ref), 'event', 'dispatch_started');
      await multi.exec();
      this.redisCommands += 3;
      this.journalEvents++;
      const r = await this.farm.executor(ref);
      if (!r.dispatched) {
        await this.redis
          .multi()
          .del(`${k}:lease`)
          .hset(`${k}:state`, 'state', 'PENDING')
          .xadd(`${this.ns}:journal`, '*', 'stage', key(ref), 'event', 'dispatch_cancelled')
          .exec();
        this.redisCommands += 3;
        this.journalEvents++;
      } else {
        await this.redis.hset(`${k}:state`, 'state', 'DISPATCHED');
        this.redisCommands += 1;
      }
    }
  }
}
