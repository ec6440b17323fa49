import IORedis from 'ioredis';
import { createDispatchEngine, type DispatchEngine } from '../../../src';
import { StoreKeys } from '../../../src/store/keys';
import { notSent } from '../../helpers/engine';
import { client, closeClients, dropPrefix, isolated } from '../../helpers/redis';
import { startPrivateRedis, type PrivateRedis } from '../../helpers/private-redis';
import { sleep } from '../../helpers/members';
import { aclUser, dropAclUsers } from '../../helpers/acl';

/**
 * The start-up probe (PERMISSIONS + MULTI + WAIT/CLIENT INFO) claims to run
 * every command the engine needs. It misses `PERSIST` (the replica-wait
 * pipeline's routing command), it treats every error that is not NOPERM as
 * "allowed" (a read-only replica's READONLY passes), and a user without DEL
 * leaves the probe key behind.
 */

const image = { scope: ['book-1'], stage: 'image' };
const engines: DispatchEngine[] = [];
const prefixes: string[] = [];
const servers: PrivateRedis[] = [];
const clients: IORedis[] = [];
let admin: IORedis;

beforeAll(() => {
  admin = client();
});
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close().catch(() => undefined)));
  await dropAclUsers(admin);
  for (const p of prefixes.splice(0)) await dropPrefix(admin, p);
  for (const c of clients.splice(0)) c.disconnect();
  for (const s of servers.splice(0)) await s.stop();
});
afterAll(closeClients);

function engineOn(connection: object, prefix: string, queueName: string, extra: object = {}) {
  const e = createDispatchEngine<unknown, string>({
    connection: connection as never,
    prefix,
    queueName,
    executor: async () => notSent('no_worker_available'),
    ...extra,
  });
  engines.push(e);
  return e;
}

describe('C25: the start-up permission probe', () => {
  it('with waitForReplicas, a user without PERSIST is refused at start-up, not after a deferral was written', async () => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    const conn = await aclUser(admin, 'rv2', prefix, ['+wait', '+client|info', '-persist']);
    const engine = engineOn(conn, prefix, queueName, { waitForReplicas: { replicas: 1, timeoutMs: 1 } });
    let ready: unknown = 'resolved';
    await engine.waitUntilReady().catch((e: unknown) => (ready = e));
    let dispatched: unknown;
    await engine.dispatchStage(image, {}).then(
      (r) => (dispatched = r),
      (e: Error) => (dispatched = e),
    );
    // refused at start-up, and every later call too: nothing written
    expect({ ready, dispatched, deferredWritten: (await admin.exists(engine.deferredStageKey(image))) === 1 }).toEqual({
      ready: expect.objectContaining({ code: 'MISSING_PERMISSION' }),
      dispatched: expect.objectContaining({ code: 'MISSING_PERMISSION' }),
      deferredWritten: false,
    });
  });

  it.each([
    'time',
    'persist',
    'set',
    'get',
    'mget',
    'pttl',
    'pexpire',
    'exists',
    'incr',
    'zadd',
    'zscore',
    'zrangebylex',
    'zrange',
    'zrem',
    'hset',
    'hget',
    'hmget',
    'rpush',
    'lpos',
    'sadd',
    'smembers',
    'srem',
  ])('a user without %s is refused at start-up, the command named', async (command) => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    const engine = engineOn(await aclUser(admin, 'rv2', prefix, [`-${command}`]), prefix, queueName);
    const refused = await engine.waitUntilReady().then(
      () => null,
      (e: { code?: string; commands?: string[] }) => e,
    );
    expect(refused).toMatchObject({ code: 'MISSING_PERMISSION' });
    expect(refused!.commands).toContain(command);
  });

  // A MULTI answered NOSCRIPT (a SCRIPT FLUSH, a slot migration's refused MULTI: ioredis then sends
  // EVALSHA to a node without the script) loads the scripts with SCRIPT LOAD and is sent again. A
  // user without it passed the probe (EVAL and EVALSHA only) and then failed every deferral of its
  // connection with a raw NOPERM (seen on a private Redis: ready, one deferral, SCRIPT FLUSH, then
  // each dispatchStage that defers rejects with "no permissions to run the 'script|load' command")
  it('a user without SCRIPT LOAD (which a transaction answered NOSCRIPT needs) is refused at start-up, the command named', async () => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    const engine = engineOn(await aclUser(admin, 'rv2', prefix, ['-script|load']), prefix, queueName);
    const refused = await engine.waitUntilReady().then(
      () => null,
      (e: { code?: string; commands?: string[] }) => e,
    );
    expect(refused).toMatchObject({ code: 'MISSING_PERMISSION', commands: ['script|load'] });
  });

  // Redis refuses a script whose KEYS the user may not write before it runs, with a NOPERM that
  // names no command: the refusal said "may not run `unknown` ... grant +unknown". An ACL written
  // for another prefix (the documented `~bull:*` on a Cluster's `{bull}` prefix) is the usual cause
  it.each([
    ['whose key pattern is for another prefix', (prefix: string) => ['resetkeys', `~other-${prefix}:*`]],
    ['whose keys under the prefix are read-only', (prefix: string) => ['resetkeys', `%R~${prefix}:*`]],
  ])('a user %s is refused at start-up, the keys to grant named (not a command)', async (_, rules) => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    const engine = engineOn(await aclUser(admin, 'rv2', prefix, rules(prefix)), prefix, queueName);
    const refused = await engine.waitUntilReady().then(
      () => null,
      (e: { code?: string; commands?: string[]; keys?: string; message?: string }) => e,
    );
    const base = new StoreKeys(prefix, queueName).base;
    expect({ ...refused, message: refused?.message }).toMatchObject({
      code: 'MISSING_PERMISSION',
      commands: [],
      keys: `${base}*`,
      message: expect.stringContaining(`grant ~${base}*`),
    });
    expect(refused!.message).not.toContain('unknown');
  });

  it('a user with every permission the engine needs is ready, and the probe leaves no key behind', async () => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    const engine = engineOn(await aclUser(admin, 'rv2', prefix), prefix, queueName);
    await engine.waitUntilReady();
    expect(await admin.exists(`${new StoreKeys(prefix, queueName).base}sd:probe`)).toBe(0);
  });

  it('a user without DEL is refused, and the probe leaves nothing behind', async () => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    const conn = await aclUser(admin, 'rv2', prefix, ['-del']);
    const engine = engineOn(conn, prefix, queueName);
    await expect(engine.waitUntilReady()).rejects.toMatchObject({ code: 'MISSING_PERMISSION' });
    const probeKey = `${new StoreKeys(prefix, queueName).base}sd:probe`;
    expect({ key: probeKey, exists: await admin.exists(probeKey), pttl: await admin.pttl(probeKey) }).toMatchObject({
      exists: 0,
    });
  });

  it('on a read-only replica, waitUntilReady does not report the engine ready', async () => {
    const master = await startPrivateRedis();
    servers.push(master);
    const replica = await startPrivateRedis(['--replicaof', '127.0.0.1', String(master.port)]);
    servers.push(replica);
    const r = new IORedis({ port: replica.port });
    clients.push(r);
    for (let i = 0; i < 100 && !/master_link_status:up/.test(await r.info('replication')); i++) await sleep(50);
    const engine = engineOn({ host: '127.0.0.1', port: replica.port }, 'rv2', 'q');
    const refused = await engine.waitUntilReady().then(
      () => 'resolved',
      (e: { code?: string; message?: string }) => ({ code: e.code, message: e.message }),
    );
    let enqueued: unknown;
    await engine.enqueue(image, {}).then(
      (x) => (enqueued = x),
      (e: { code?: string }) => (enqueued = e.code),
    );
    // not ready (a write would fail: READONLY), and said why
    expect({ refused, enqueued }).toEqual({
      refused: { code: 'INVALID_OPTIONS', message: expect.stringContaining('read-only replica') },
      enqueued: 'INVALID_OPTIONS',
    });
    // the refusal is not kept: promoted to a master, the same engine is ready
    await r.replicaof('NO', 'ONE');
    await engine.waitUntilReady();
    expect(await engine.enqueue(image, {})).toMatchObject({ added: true });
  });

  it('a user granted the missing permission after a refusal: the next waitUntilReady is ready, no restart', async () => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    const conn = await aclUser(admin, 'rv2', prefix, ['-zadd']);
    const engine = engineOn(conn, prefix, queueName);
    await expect(engine.waitUntilReady()).rejects.toMatchObject({ code: 'MISSING_PERMISSION', commands: ['zadd'] });
    await admin.call('ACL', 'SETUSER', conn.username, '+zadd');
    await engine.waitUntilReady();
    expect((await engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
  });

  it('a user without several commands is refused naming them all, sorted', async () => {
    const { prefix, queueName } = isolated();
    prefixes.push(prefix);
    // (the probe meets them as time, persist, set, get)
    const engine = engineOn(
      await aclUser(admin, 'rv2', prefix, ['-time', '-persist', '-set', '-get']),
      prefix,
      queueName,
    );
    await expect(engine.waitUntilReady()).rejects.toMatchObject({
      code: 'MISSING_PERMISSION',
      commands: ['get', 'persist', 'set', 'time'],
    });
  });

  it("a command Redis refuses for another reason than the ACL fails start-up with Redis' own error, not MISSING_PERMISSION", async () => {
    // SCRIPT renamed away (as some hosted Redis do): SCRIPT LOAD answers "unknown command"
    const server = await startPrivateRedis(['--rename-command', 'SCRIPT', '']);
    servers.push(server);
    const engine = engineOn({ host: '127.0.0.1', port: server.port }, 'rv2', 'q');
    const refused = await engine.waitUntilReady().then(
      () => 'resolved',
      (e: { code?: string; message?: string }) => ({ code: e.code, message: e.message }),
    );
    expect(refused).toEqual({ code: undefined, message: expect.stringContaining("unknown command 'script'") });
  });
});
