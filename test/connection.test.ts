import IORedis from 'ioredis';
import { createDispatchEngine, InvalidOptionsError } from '../src';
import { dropPrefix, isolated, redisOptions, waitFor, client, closeClients } from './helpers/redis';

afterEach(closeClients);

describe('connections', () => {
  it('works on a producer connection without maxRetriesPerRequest: null, and never closes a connection passed in', async () => {
    const conn = new IORedis({ ...redisOptions() });
    const { prefix, queueName } = isolated();
    const calls: string[] = [];
    const engine = createDispatchEngine({
      connection: conn,
      prefix,
      queueName,
      executor: async (ref) => {
        calls.push(ref.stage);
        return { dispatched: true, jobs: 1, reason: null };
      },
    });
    try {
      await engine.enqueue({ scope: ['b'], stage: 'image' }, {});
      engine.createWorker();
      await waitFor(() => calls.length === 1, 'processed through a worker made from the shared connection');
    } finally {
      await engine.close();
    }
    expect(conn.status).toBe('ready');
    expect(await conn.ping()).toBe('PONG');
    await dropPrefix(conn, prefix);
    await conn.quit();
  });

  it('methods after close reject with EngineClosedError', async () => {
    const { prefix, queueName } = isolated();
    const engine = createDispatchEngine({
      connection: redisOptions(),
      prefix,
      queueName,
      executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
    });
    await engine.close();
    await expect(engine.dispatchStage({ scope: ['b'], stage: 's' }, {})).rejects.toMatchObject({
      code: 'ENGINE_CLOSED',
    });
    await dropPrefix(client(), prefix);
  });
});

describe('options are validated before anything is opened', () => {
  const base = { connection: redisOptions(), executor: async () => ({ dispatched: true, jobs: 1, reason: null }) };
  it.each([
    [{ windows: { capacitySeconds: 0 } }, /windows\.capacitySeconds/],
    [{ windows: { capacitySeconds: 601 } }, /windows\.capacitySeconds/],
    [{ windows: { idempotentSeconds: -1 } }, /windows\.idempotentSeconds/],
    [{ windows: { jitter: 0.9 } }, /windows\.jitter/],
    [{ retry: { attempts: 0 } }, /retry\.attempts/],
    [{ limits: { maxCapacityDeferrals: 0 } }, /limits\.maxCapacityDeferrals/],
    [{ queueName: 'a:b' }, /queueName/],
    [{ executor: 'nope' }, /executor/],
  ])('%j', (bad, message) => {
    expect(() => createDispatchEngine({ ...base, ...(bad as object) } as never)).toThrow(InvalidOptionsError);
    expect(() => createDispatchEngine({ ...base, ...(bad as object) } as never)).toThrow(message);
  });
});
