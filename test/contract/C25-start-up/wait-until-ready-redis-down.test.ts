import { createDispatchEngine } from '../../../src';
import { SENT } from '../../helpers/engine';
import { PrivateRedis } from '../../helpers/private-redis';
import { isolated, waitFor } from '../../helpers/redis';

describe('C25: waitUntilReady while Redis is down', () => {
  it('resolves once Redis is up (the failure is not cached)', async () => {
    // a private server, stopped: its port is known and nothing answers on it until the restart
    const server = await PrivateRedis.start();
    await server.kill9();
    // not the harness: this engine's connection must point at the stopped server
    const engine = createDispatchEngine<unknown, string>({
      connection: { host: '127.0.0.1', port: server.port },
      ...isolated(),
      executor: async () => SENT,
    });
    let refused = 0;
    engine.queue.on('error', () => (refused += 1));
    let ready = false;
    const p = engine.waitUntilReady().then(() => (ready = true));
    try {
      await waitFor(() => refused >= 2, 'the engine tried to connect and was refused twice');
      expect(ready).toBe(false);
      await server.restart();
      await p;
      expect(ready).toBe(true);
    } finally {
      await engine.close();
      await server.stop();
    }
  });
});
