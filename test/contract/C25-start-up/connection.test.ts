import { connect as connectTcp, createServer, type AddressInfo, type Socket } from 'node:net';
import IORedis from 'ioredis';
import { createDispatchEngine, InvalidOptionsError } from '../../../src';
import { dropPrefix, isolated, keysUnder, redisOptions, waitFor, client, closeClients } from '../../helpers/redis';

afterEach(closeClients);

// Engines by hand, not harness(): these tests are about the connection given to createDispatchEngine and its options.
describe('C25: connections', () => {
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

  it('every method after close rejects with ENGINE_CLOSED', async () => {
    const { prefix, queueName } = isolated();
    const engine = createDispatchEngine({
      connection: redisOptions(),
      prefix,
      queueName,
      executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
    });
    await engine.close();
    const ref = { scope: ['b'], stage: 's' };
    const calls: [string, () => Promise<unknown>][] = [
      ['dispatchStage', () => engine.dispatchStage(ref, {})],
      ['enqueue', () => engine.enqueue(ref, {})],
      ['isStageDeferred', () => engine.isStageDeferred(ref)],
      ['cancelActiveDispatch', () => engine.cancelActiveDispatch(ref)],
      ['clearDeferrals', () => engine.clearDeferrals(['b'])],
      ['listDeferred', () => engine.listDeferred()],
      ['listDeferred (a page)', () => engine.listDeferred(['b'], { limit: 1 })],
      ['listGates', () => engine.listGates()],
      ['wakeDeferred', () => engine.wakeDeferred({ stage: 's' })],
      ['waitUntilReady', () => engine.waitUntilReady()],
      ['createWorker', async () => engine.createWorker()],
    ];
    for (const [name, call] of calls) {
      const code = await call().then(
        () => 'resolved',
        (e: { code?: string }) => e.code,
      );
      expect({ name, code }).toEqual({ name, code: 'ENGINE_CLOSED' });
    }
    expect(await keysUnder(client(), prefix)).toEqual([]);
    await dropPrefix(client(), prefix);
  });
});

/**
 * A TCP pass-through to the test Redis that counts the connections made
 * through it: the engine talks to the real Redis, and the test sees every
 * socket it opens.
 */
async function countingProxy(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  const target = redisOptions();
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((inbound) => {
    connections += 1;
    const outbound = connectTcp(target.port, target.host);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('C25: options are validated before anything is opened', () => {
  const cases: [object, RegExp][] = [
    [{ windows: { capacitySeconds: 0 } }, /windows\.capacitySeconds/],
    [{ windows: { capacitySeconds: 601 } }, /windows\.capacitySeconds/],
    [{ windows: { idempotentSeconds: -1 } }, /windows\.idempotentSeconds/],
    [{ windows: { jitter: 0.9 } }, /windows\.jitter/],
    [{ retry: { attempts: 0 } }, /retry\.attempts/],
    [{ limits: { maxCapacityDeferrals: 0 } }, /limits\.maxCapacityDeferrals/],
    [{ queueName: 'a:b' }, /queueName/],
    [{ executor: 'nope' }, /executor/],
  ];

  it.each(cases)('%j is refused, no connection is opened', async (bad, message) => {
    const proxy = await countingProxy();
    const { prefix } = isolated();
    const connection = { host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: null };
    const base = { connection, prefix, executor: async () => ({ dispatched: true, jobs: 1, reason: null }) };
    let control: IORedis | undefined;
    try {
      let thrown: unknown;
      try {
        createDispatchEngine({ ...base, ...bad } as never);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(InvalidOptionsError);
      expect(thrown).toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringMatching(message) });
      // A control client connects through the proxy after the refused call: once
      // its ping is answered, a socket the engine had opened before it would
      // have been accepted (and counted) too.
      control = new IORedis(connection);
      expect(await control.ping()).toBe('PONG');
      expect(proxy.connections()).toBe(1);
      expect(await keysUnder(client(), prefix)).toEqual([]);
    } finally {
      control?.disconnect();
      await proxy.close();
    }
  });
});
