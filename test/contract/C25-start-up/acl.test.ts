import IORedis from 'ioredis';
import { createDispatchEngine } from '../../../src/engine';
import type { ExecutorResult, StageRef } from '../../../src/types';
import { aclUser, dropAclUsers } from '../../helpers/acl';
import { client, closeClients, dropPrefix, isolated, waitFor } from '../../helpers/redis';

/** With `waitForReplicas` the engine also sends WAIT and reads CLIENT INFO (docs/reliability.md). */
const WAIT_RULES = ['+wait', '+client|info'];

describe.each([
  { name: 'the documented ACL', extra: [] as string[], waitForReplicas: undefined },
  {
    name: 'the documented ACL plus +wait +client|info, with waitForReplicas (no replica here: every WAIT falls short)',
    extra: WAIT_RULES,
    waitForReplicas: { replicas: 1, timeoutMs: 1 },
  },
])('C25: under a Redis ACL user restricted to the prefix: $name', ({ extra, waitForReplicas }) => {
  let admin: IORedis;
  /** How to connect as the ACL user. */
  let connection: Awaited<ReturnType<typeof aclUser>>;
  const { prefix, queueName } = isolated();

  beforeAll(async () => {
    admin = client();
    connection = await aclUser(admin, 'rel', prefix, extra);
  });
  afterAll(async () => {
    await dropAclUsers(admin);
    await dropPrefix(admin, prefix);
    await closeClients();
  });

  it('enqueues, defers, wakes up, cancels, clears and dispatches end to end', async () => {
    // by hand, not harness(): the engine connects as the least-privilege ACL user
    const calls = new Map<string, number>();
    const engine = createDispatchEngine<unknown, string>({
      connection: connection as never,
      prefix,
      queueName,
      executor: async (ref: StageRef): Promise<ExecutorResult<string>> => {
        const n = (calls.get(ref.stage) ?? 0) + 1;
        calls.set(ref.stage, n);
        return n < 3
          ? { dispatched: false, jobs: 0, reason: 'no_worker_available' }
          : { dispatched: true, jobs: 1, reason: null };
      },
      // (1 s: long enough for the test to see a deferral listed, however slow the machine)
      windows: { capacitySeconds: 1, jitter: 0 },
      ...(waitForReplicas ? { waitForReplicas } : {}),
    });
    let lags = 0;
    engine.on('replicaLag', () => lags++);
    const errors: Error[] = [];
    engine.queue.on('error', (e) => errors.push(e));
    const worker = engine.createWorker({ concurrency: 4 });
    worker.on('error', (e) => errors.push(e));
    worker.on('failed', (_job, e) => errors.push(e));
    try {
      const refs = ['a', 'b', 'c', 'd'].map((stage) => ({ scope: ['acl', 'x'], stage }));
      for (const ref of refs) expect(await engine.enqueue(ref, {})).toMatchObject({ added: true });
      // cancel one while it is deferred, clear the scope for the others
      await waitFor(async () => (await engine.listDeferred(['acl'])).length > 0, 'a deferral');
      await engine.cancelActiveDispatch(refs[3]!);
      await engine.clearDeferrals(['acl', 'x']);
      await waitFor(() => ['a', 'b', 'c'].every((s) => (calls.get(s) ?? 0) >= 3), 'three stages dispatched', 15_000);
      expect(errors).toEqual([]);
      if (waitForReplicas) expect(lags).toBeGreaterThan(0); // the WAITs were sent, and allowed
      // the user really is confined: a key outside the prefix is refused
      const confined = new IORedis({ ...connection, maxRetriesPerRequest: 0 });
      await expect(confined.set(`not-${prefix}`, '1')).rejects.toThrow(/NOPERM/);
      confined.disconnect();
    } finally {
      await worker.close();
      await engine.close();
    }
  });
});

describe('C25: a Redis user missing a permission is refused at start-up, before anything is written', () => {
  let admin: IORedis;
  beforeAll(() => {
    admin = client();
  });
  afterAll(async () => {
    await dropAclUsers(admin);
    await closeClients();
  });

  it.each([
    { without: '-wait', extra: ['+client|info'], waitForReplicas: { replicas: 1, timeoutMs: 1 }, names: ['wait'] },
    { without: '-time', extra: ['-time'], waitForReplicas: undefined, names: ['time'] },
    { without: '-evalsha', extra: ['-evalsha'], waitForReplicas: undefined, names: ['evalsha'] },
    { without: '-zrangebylex', extra: ['-zrangebylex'], waitForReplicas: undefined, names: ['zrangebylex'] },
  ])('$without: MISSING_PERMISSION names $names; enqueue, dispatch, cancel and clear write nothing', async (c) => {
    const { prefix, queueName } = isolated();
    const connection = await aclUser(admin, 'rel', prefix, c.extra);
    const executor = jest.fn(async (): Promise<ExecutorResult<string>> => ({
      dispatched: true,
      jobs: 1,
      reason: null,
    }));
    const engine = createDispatchEngine<unknown, string>({
      connection: connection as never,
      prefix,
      queueName,
      executor,
      ...(c.waitForReplicas ? { waitForReplicas: c.waitForReplicas } : {}),
    });
    try {
      const refused = { code: 'MISSING_PERMISSION', commands: c.names };
      await expect(engine.waitUntilReady()).rejects.toMatchObject(refused);
      const ref = { scope: ['acl'], stage: 'image' };
      await expect(engine.enqueue(ref, {})).rejects.toMatchObject(refused);
      await expect(engine.dispatchStage(ref, {})).rejects.toMatchObject(refused);
      await expect(engine.cancelActiveDispatch(ref)).rejects.toMatchObject(refused);
      await expect(engine.clearDeferrals(['acl'])).rejects.toMatchObject(refused);
      expect(executor).not.toHaveBeenCalled();
      // nothing of the engine's and no job (BullMQ may keep its own queue metadata)
      const keys = await admin.keys(`${prefix}:*`);
      expect(keys.filter((k) => /:sd:(?!fence$)|:de:|:wait$|:delayed$|@/.test(k))).toEqual([]);
    } finally {
      await engine.close();
      await dropPrefix(admin, prefix);
    }
  });
});
