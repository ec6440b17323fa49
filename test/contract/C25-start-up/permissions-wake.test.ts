import type IORedis from 'ioredis';
import { createDispatchEngine, type DispatchEngine } from '../../../src';
import { aclUser, dropAclUsers } from '../../helpers/acl';
import { notSent } from '../../helpers/engine';
import { client, closeClients, dropPrefix, isolated, keysUnder } from '../../helpers/redis';

/**
 * The start-up permission probe (src/lua/permissions.lua, run by src/store/client.ts
 * checkPermissions) tries every command the engine's scripts use, WAKE's INCR (the wake
 * sequences) and ZRANGE (the wait indexes) included: a user missing one is refused at start-up
 * with the typed MissingPermissionError (docs/reliability.md: "every operation rejects with
 * MISSING_PERMISSION naming the command"), not a raw NOPERM ReplyError from wakeDeferred later,
 * nor, without INCR, a deferral's MULTI whose BullMQ add fails after DEFER ran.
 */
let admin: IORedis;
const prefixes: string[] = [];
const engines: DispatchEngine[] = [];
beforeAll(() => {
  admin = client();
});
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close().catch(() => undefined)));
  await dropAclUsers(admin);
  for (const p of prefixes.splice(0)) await dropPrefix(admin, p);
});
afterAll(closeClients);

async function engineWithout(command: string) {
  const { prefix, queueName } = isolated();
  prefixes.push(prefix);
  const engine = createDispatchEngine<unknown, string>({
    connection: await aclUser(admin, 'rv16a', prefix, [`-${command}`]),
    prefix,
    queueName,
    windows: { capacitySeconds: 300, jitter: 0 },
    executor: async () => notSent('no_worker_available'),
  });
  engines.push(engine);
  return { engine, prefix };
}

describe('C25: the permission probe and the commands of WAKE', () => {
  it.each(['incr', 'zrange'])(
    'a user without %s is refused at start-up with MISSING_PERMISSION naming it; wakeDeferred too',
    async (command) => {
      const { engine } = await engineWithout(command);
      const ready = await engine.waitUntilReady().then(
        () => 'ready',
        (e: { code?: string; message: string }) => e.code ?? e.message,
      );
      const wake = await engine.wakeDeferred().then(
        () => 'woke',
        (e: { code?: string; message: string }) => e.code ?? e.message,
      );
      expect({ ready, wake }).toEqual({ ready: 'MISSING_PERMISSION', wake: 'MISSING_PERMISSION' });
    },
  );

  it('a user without incr writes nothing: refused before the deferral (no marker or licence without a wake-up)', async () => {
    const { engine, prefix } = await engineWithout('incr');
    const ref = { scope: ['book-1'], stage: 'image' };
    const r = await engine.dispatchStage(ref, {}).then(
      () => 'resolved',
      (e: { code?: string; message: string }) => e.code ?? e.message,
    );
    const keys = await keysUnder(admin, prefix);
    const deferred = await admin.exists(engine.deferredStageKey(ref));
    const [listed] = await engine.listDeferred().catch(() => [undefined]);
    const wakeUp = listed ? await engine.queue.getJob(listed.wakeUpJobId) : undefined;
    // either refused before anything is written, or a deferral whose wake-up exists
    expect({
      r,
      deferredWithoutWakeUp: deferred === 1 && !wakeUp,
      keys: keys.filter((k) => k.includes('sd:deferred')),
    }).toEqual({
      r: 'MISSING_PERMISSION',
      deferredWithoutWakeUp: false,
      keys: [],
    });
  });
});
