import IORedis from 'ioredis';
import { Queue } from 'bullmq';
import { createDispatchEngine, stageId, type DispatchEngine } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { PrivateRedis } from '../../helpers/private-redis';

/**
 * Clause 2 and clause 12 measured exactly: on a Redis of our own nothing else
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

describe("C2: what one batch call sends, exactly (the hot path's script)", () => {
  it('begins of two stage kinds in one call read the fence and the wake sequences in their MGETs (no GET of their own) and write the fence once', async () => {
    const queue = new Queue('reads', { connection: { host: '127.0.0.1', port: server.port }, prefix: 'exact' });
    const store = new DeferralStore(queue);
    try {
      const begin = (stage: string, i: number) =>
        store.begin({
          sid: stageId({ scope: ['book', `s${i}`], stage }),
          ownJobId: '',
          lockMs: 30_000,
          wakeUp: false,
          skewToleranceMs: 1000,
        });
      await Promise.all([begin('image', 0)]); // warm: the script is loaded
      await redis.config('RESETSTAT');
      // one turn: one call, three image stages and two video stages, each takes its lock
      const got = await Promise.all([
        begin('image', 1),
        begin('video', 2),
        begin('image', 3),
        begin('video', 4),
        begin('image', 5),
      ]);
      expect(got.map((b) => b.kind)).toEqual(['locked', 'locked', 'locked', 'locked', 'locked']);
      const fences = got.map((b) => (b.kind === 'locked' ? b.fencingToken : 0));
      for (let i = 1; i < fences.length; i++) expect(fences[i]).toBe(fences[i - 1]! + 1);
      const { commands } = await counters();
      const { info: _info, 'config|resetstat': _reset, ...rest } = commands;
      // the marker, the lock, and (first begin of the call, first of its kind) the fence and the
      // wake sequences: one MGET a begin; five locks and one write of the fence for the whole call
      expect(rest).toEqual({ evalsha: 1, time: 1, mget: 5, zrangebylex: 5, set: 6 });
      expect(await redis.get(store.keys.fence)).toBe(String(fences[4]));
    } finally {
      await store.close();
      await queue.close();
    }
  });
});
