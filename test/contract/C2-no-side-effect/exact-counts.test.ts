import IORedis from 'ioredis';
import { createDispatchEngine, type DispatchEngine } from '../../../src';
import { PrivateRedis } from '../../helpers/private-redis';

/**
 * While a stage is deferred, measured exactly: on a Redis of our own nothing else
 * writes, so the server's write counter and command counts are this test's.
 */
let server: PrivateRedis;
let redis: IORedis;
let engine: DispatchEngine;
let calls = 0;
const ref = { scope: ['book', 'ch', 'sc'], stage: 'image' };

beforeAll(async () => {
  server = await PrivateRedis.start();
  redis = new IORedis({ port: server.port });
  // by hand, not harness(): the engine is on the private server, shared by the tests of this file
  engine = createDispatchEngine({
    connection: { host: '127.0.0.1', port: server.port },
    prefix: 'exact',
    executor: async () => {
      calls++;
      return { dispatched: false, jobs: 0, reason: 'no_worker_available' };
    },
  });
});

afterAll(async () => {
  await engine.close();
  await redis.quit();
  await server.stop();
});

async function counters(): Promise<{ writes: number; commands: Record<string, number> }> {
  const persistence = await redis.info('persistence');
  const stats = await redis.info('commandstats');
  const commands: Record<string, number> = {};
  for (const m of stats.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) commands[m[1]!] = Number(m[2]);
  return { writes: Number(/rdb_changes_since_last_save:(\d+)/.exec(persistence)?.[1]), commands };
}

describe('C2: while a stage is deferred (exact counts on a private Redis)', () => {
  it('a suppressed dispatchStage is 1 command and 0 writes; so is a suppressed enqueue', async () => {
    await engine.dispatchStage(ref, {});
    expect(calls).toBe(1);
    await engine.dispatchStage(ref, {}); // warm: the script is loaded
    await engine.enqueue(ref, {});
    await redis.config('RESETSTAT');
    const before = await counters();
    for (let i = 0; i < 50; i++) {
      expect((await engine.dispatchStage(ref, {}, { force: true })).reason).toBe('deferred_capacity');
      expect((await engine.enqueue(ref, {})).reason).toBe('deferred');
    }
    const after = await counters();
    expect(after.writes - before.writes).toBe(0);
    // one round trip each: 100 script calls (the reads inside them are MGET/EXISTS/PTTL: the
    // begin reads the marker and the lock in one MGET)
    // (the test's own INFO and CONFIG RESETSTAT are left out)
    const { info: _info, 'config|resetstat': _reset, ...rest } = after.commands;
    expect(rest.evalsha).toBe(100);
    // TIME: the batch reads Redis' clock (windows are decided on it); a read
    expect(Object.keys(rest).sort()).toEqual(['evalsha', 'exists', 'mget', 'pttl', 'time']);
    expect(calls).toBe(1);
  });
});
