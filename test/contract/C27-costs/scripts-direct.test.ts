/**
 * Each engine script called directly (EVAL of its flattened text, src/lua/generated.ts) with
 * KEYS/ARGV as its header documents, on a state prepared by hand: the keys it leaves are the
 * ones its header promises, and nothing else of the stage is kept.
 */
import * as lua from '../../../src/lua/generated';
import { client, keysUnder, scriptSuite } from '../../helpers/redis';
import { aclUser, dropAclUsers } from '../../helpers/acl';

const suite = scriptSuite();
const { redis } = suite;
const SID = 'book-1/image';
const k = {
  M: (sid = SID) => `${suite.B}sd:deferred:${sid}`,
  L: () => `${suite.B}sd:inflight:${SID}`,
  IDX: () => `${suite.B}sd:licences`,
  F: () => `${suite.B}sd:fence`,
  D: () => `${suite.B}de:${SID}`,
  WQ: () => `${suite.B}sd:wq:image`,
  J: (id: string) => suite.B + id,
};
const run = (script: string, keys: string[], args: (string | number)[]) =>
  redis.eval(script, keys.length, ...keys, ...args.map(String)) as Promise<unknown>;
const members = () => redis.zrange(k.IDX(), '0', '-1');
const nowMs = async () => {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
};
/** Job hashes that exist, as BullMQ keeps them (the scripts only read `timestamp` and the engine's fields). */
const jobs = (...ids: string[]) => Promise.all(ids.map((id) => redis.hset(k.J(id), 'timestamp', 1, 'data', '{}')));

describe('C27: DEFER called directly', () => {
  it("records the deferral: marker, licence, wait index; revokes the old licence, drops the lock and the job's dedup key", async () => {
    const own = `${SID}@j1`;
    const old = `${SID}@old`;
    const wake = `${SID}@cap.1.0.0.1`;
    await jobs(own, old);
    await redis.zadd(k.IDX(), 0, old);
    await redis.set(k.L(), `${own}\n7`, 'PX', 60_000);
    await redis.set(k.D(), own);
    const until = (await nowMs()) + 60_000;
    const keys = [k.L(), k.M(), k.IDX(), `${suite.B}log`, k.D(), k.J(own)];
    const args = [SID, `${own}\n7`, wake, until, 'line', own, suite.B, 'capacity', '1', '', '', '', 0];
    expect(await run(lua.DEFER, keys, args)).toEqual([1, 0, old]);
    expect(await redis.get(k.M())).toBe(wake);
    expect(await redis.pttl(k.M())).toBeGreaterThan(50_000);
    expect(await members()).toEqual([wake]);
    expect(await redis.zrange(k.WQ(), '0', '-1')).toEqual([SID]);
    expect(await redis.smembers(`${suite.B}sd:wqk`)).toEqual(['image']);
    expect([await redis.exists(k.L()), await redis.exists(k.D())]).toEqual([0, 0]);
    expect([await redis.hget(k.J(own), 'sds'), await redis.hget(k.J(old), 'sds')]).toEqual(['1', '1']);
    expect(await redis.lrange(`${suite.B}log`, 0, -1)).toEqual(['line']);
    // the same transaction again (a resend) records nothing more
    expect(await run(lua.DEFER, keys, args)).toEqual([1, 0]);
  });
});

describe('C27: EXTEND called directly', () => {
  it("renews the holder's lock (1), a cancelled one (2), and leaves another's alone (0)", async () => {
    await redis.set(k.L(), 'j\n1', 'PX', 1000);
    expect(await run(lua.EXTEND, [k.L()], ['j\n1', 60_000])).toBe(1);
    expect(await redis.pttl(k.L())).toBeGreaterThan(50_000);
    await redis.set(k.L(), '\nj\n1', 'PX', 1000);
    expect(await run(lua.EXTEND, [k.L()], ['j\n1', 60_000])).toBe(2);
    expect(await redis.pttl(k.L())).toBeGreaterThan(50_000);
    await redis.set(k.L(), 'other\n2', 'PX', 1000);
    expect(await run(lua.EXTEND, [k.L()], ['j\n1', 60_000])).toBe(0);
    expect(await redis.pttl(k.L())).toBeLessThanOrEqual(1000);
  });
});

describe('C27: CANCEL called directly', () => {
  it('ends the deferral, empties the licences, marks the lock and every job of the stage cancelled', async () => {
    const wake = `${SID}@cap.1.0.0.1`;
    const failed = `${SID}@f`;
    const holder = `${SID}@a`;
    const pending = `${SID}@p`;
    await jobs(wake, failed, holder, pending);
    await redis.set(k.M(), wake, 'PX', 60_000);
    await redis.zadd(k.IDX(), 0, wake, 0, `${failed}?`);
    await redis.zadd(k.WQ(), 1, SID);
    await redis.set(k.L(), `${holder}\n5`, 'PX', 60_000);
    await redis.set(k.D(), pending);
    const reply = await run(lua.CANCEL, [k.M(), k.L(), k.IDX(), k.D()], [SID, suite.B]);
    expect(reply).toEqual([1, 1, pending, wake, `${failed}?`]);
    expect([await redis.exists(k.M()), await redis.exists(k.D()), await redis.exists(k.WQ())]).toEqual([0, 0, 0]);
    expect(await members()).toEqual([]);
    expect(await redis.get(k.L())).toBe(`\n${holder}\n5`);
    for (const id of [wake, failed, holder, pending]) expect([id, await redis.hget(k.J(id), 'sdc')]).toEqual([id, '1']);
  });
});

describe('C27: CLEAR called directly', () => {
  it("ends the deferrals whose marker names the licence given (licence marked '!'), and only those", async () => {
    const wake = `${SID}@cap.1.0.0.1`;
    const other = 'book-2/image';
    await redis.set(k.M(), wake, 'PX', 60_000);
    await redis.set(k.M(other), `${other}@cap.1.0.0.2`, 'PX', 60_000);
    await redis.zadd(k.IDX(), 0, wake, 0, `${other}@cap.1.0.0.1`);
    await redis.zadd(k.WQ(), 1, SID, 2, other);
    expect(await run(lua.CLEAR, [k.IDX()], [suite.B, wake, `${other}@cap.1.0.0.1`])).toEqual([wake]);
    expect(await redis.exists(k.M())).toBe(0);
    expect(await redis.get(k.M(other))).toBe(`${other}@cap.1.0.0.2`);
    expect(await members()).toEqual([`${other}@cap.1.0.0.1`, `${wake}!`].sort());
    expect(await redis.zrange(k.WQ(), '0', '-1')).toEqual([other]);
  });
});

describe('C27: FAIL called directly', () => {
  it("turns the holder's licence into its failed-job record and ends its wait; a worker without the job writes nothing", async () => {
    const me = `${SID}@j1`;
    await jobs(me);
    await redis.set(`${k.J(me)}:lock`, 'tok');
    await redis.zadd(k.IDX(), 0, me);
    await redis.zadd(k.WQ(), 1, SID);
    const keys = [k.IDX(), k.J(me), `${k.J(me)}:lock`];
    expect(await run(lua.FAIL, keys, [SID, me, suite.B, 'not-mine', '1'])).toBe(2);
    expect(await members()).toEqual([me]);
    expect(await run(lua.FAIL, keys, [SID, me, suite.B, 'tok', '1'])).toBe(1);
    expect(await members()).toEqual([`${me}?`]);
    expect(await redis.exists(k.WQ())).toBe(0);
  });
});

describe('C27: WAKE called directly', () => {
  it('ends the longest-waiting capacity deferral of the kind, bumps its wake sequence, keeps the licence', async () => {
    const second = 'book-2/image';
    const w1 = `${SID}@cap.1.0.0.1`;
    const w2 = `${second}@cap.1.0.0.1`;
    await jobs(w1, w2);
    await redis.set(k.M(), w1, 'PX', 60_000);
    await redis.set(k.M(second), w2, 'PX', 60_000);
    await redis.zadd(k.IDX(), 0, w1, 0, w2);
    await redis.zadd(k.WQ(), 200, second, 100, SID);
    await redis.sadd(`${suite.B}sd:wqk`, 'image');
    const reply = await run(lua.WAKE, [k.IDX(), `${suite.B}sd:wqk`, k.WQ()], [suite.B, 1, '', 'image']);
    expect(reply).toEqual([SID, w1]);
    expect([await redis.exists(k.M()), await redis.get(k.M(second))]).toEqual([0, w2]);
    expect(await members()).toEqual([w1, w2]);
    expect(await redis.get(`${suite.B}sd:wseq:image`)).toBe('1');
  });
});

describe('C27: REPLACE called directly', () => {
  it('answers the data first, writes the new data over what was read, and never a job BullMQ started', async () => {
    const wake = `${SID}@cap.1.0.0.1`;
    const data = JSON.stringify({ v: 1, scope: ['book-1'], stage: 'image', payload: 1 });
    const next = JSON.stringify({ v: 1, scope: ['book-1'], stage: 'image', payload: 2 });
    await redis.set(k.M(), wake, 'PX', 60_000);
    await redis.hset(k.J(wake), 'data', data, 'timestamp', 1);
    expect(await run(lua.REPLACE, [k.M()], [SID, suite.B, '', '', ''])).toBe(data);
    expect(await run(lua.REPLACE, [k.M()], [SID, suite.B, '', data, next])).toBe(1);
    expect(await redis.hget(k.J(wake), 'data')).toBe(next);
    await redis.hset(k.J(wake), 'atm', 1);
    expect(await run(lua.REPLACE, [k.M()], [SID, suite.B, wake, next, data])).toBe(0);
    expect(await redis.hget(k.J(wake), 'data')).toBe(next);
    // the marker gone (its window ended since the enqueue read it): nothing to replace, no error
    await redis.del(k.M());
    expect(await run(lua.REPLACE, [k.M()], [SID, suite.B, '', '', ''])).toBe(0);
  });
});

describe('C27: BATCH called directly', () => {
  it("a begin of a stage with nothing takes the lock with a fencing token above Redis' µs, and F holds it", async () => {
    const before = (await nowMs()) * 1000;
    const [rec, now] = (await run(lua.BATCH, [k.IDX(), k.F()], [suite.B, 1, 'b', SID, '', 60_000, '', 0, '', ''])) as [
      string,
      number,
    ];
    const fence = rec.split(',')[0]!;
    expect(rec).toBe(`${fence},0,0,0:0,0,0,0,`);
    expect(Number(fence)).toBeGreaterThanOrEqual(before);
    expect(now).toBeGreaterThanOrEqual(Math.floor(before / 1000));
    expect(await redis.get(k.L())).toBe(`\n${fence}`);
    expect(await redis.get(k.F())).toBe(fence);
  });

  it('a begin of a deferred stage answers its marker and takes nothing', async () => {
    const wake = `${SID}@cap.1.0.0.1`;
    await jobs(wake);
    await redis.set(k.M(), wake, 'PX', 60_000);
    const [reply] = (await run(
      lua.BATCH,
      [k.IDX(), k.F()],
      [suite.B, 1, 'b', SID, '', 60_000, '', 0, '', ''],
    )) as unknown[];
    expect(reply).toEqual([1, wake]);
    expect([await redis.exists(k.L()), await redis.exists(k.F())]).toEqual([0, 0]);
  });

  it('a begin of a stage whose marker names a wake-up that is gone deletes the marker and takes the lock', async () => {
    await redis.set(k.M(), `${SID}@cap.1.0.0.1`, 'PX', 60_000);
    const [reply] = (await run(
      lua.BATCH,
      [k.IDX(), k.F()],
      [suite.B, 1, 'b', SID, '', 60_000, '', 0, '', ''],
    )) as unknown[];
    expect(typeof reply).toBe('string');
    expect([await redis.exists(k.M()), await redis.exists(k.L())]).toEqual([0, 1]);
  });

  it("a release ending the chain drops the lock, revokes the licence (its job superseded) and ends the stage's wait", async () => {
    const wake = `${SID}@cap.1.0.0.1`;
    await jobs(wake);
    await redis.set(k.L(), '\n9', 'PX', 60_000);
    await redis.zadd(k.IDX(), 0, wake);
    await redis.zadd(k.WQ(), 1, SID);
    const [reply] = (await run(
      lua.BATCH,
      [k.IDX(), k.F()],
      [suite.B, 1, 'r', SID, '', '\n9', '1', '', '', ''],
    )) as unknown[];
    expect(reply).toEqual([0, wake]);
    expect([await redis.exists(k.L()), await redis.exists(k.WQ())]).toEqual([0, 0]);
    expect(await members()).toEqual([]);
    expect(await redis.hget(k.J(wake), 'sds')).toBe('1');
  });
});

describe('C27: PERMISSIONS called directly', () => {
  const probeKeys = () => [`${suite.B}sd:probe`, k.F()];
  const prefix = () => suite.B.replace(/:q:$/, '');
  const queueKeys = () => keysUnder(redis, prefix());
  /** A client of a Redis user with the documented ACL on the suite's prefix, less `denied`. */
  const userWithout = async (...denied: string[]) => {
    const rules = denied.map((command) => `-${command}`);
    return client(await aclUser(redis, 'perm', prefix(), rules));
  };
  afterEach(() => dropAclUsers(redis));

  it('answers no command missing for a user that may run them all, and leaves no key behind', async () => {
    expect(await run(lua.PERMISSIONS, probeKeys(), [])).toEqual([]);
    expect(await queueKeys()).toEqual([]);
  });

  it('names each command the user may not run, and leaves no key behind', async () => {
    const user = await userWithout('zadd', 'srem', 'time');
    const reply = (await user.eval(lua.PERMISSIONS, 2, ...probeKeys())) as string[];
    expect([...reply].sort()).toEqual(['srem', 'time', 'zadd']);
    expect(await queueKeys()).toEqual([]);
  });

  it('a user without DEL: answers del alone and writes nothing (a probe key it could not delete again)', async () => {
    const user = await userWithout('del');
    expect(await user.eval(lua.PERMISSIONS, 2, ...probeKeys())).toEqual(['del']);
    expect(await queueKeys()).toEqual([]);
  });
});
