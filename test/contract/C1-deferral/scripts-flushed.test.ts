import IORedis from 'ioredis';
import { createDispatchEngine, type StageRef } from '../../../src';
import { notSent } from '../../helpers/engine';
import { startPrivateRedis } from '../../helpers/private-redis';

const image: StageRef = { scope: ['book-1', 'ch-1'], stage: 'image' };

/**
 * ioredis sends a script in a MULTI as EVALSHA once it sent it on the connection: after a
 * `SCRIPT FLUSH` (an operator, a restarted Redis that kept its data) each such MULTI answers
 * NOSCRIPT. The engine loads its scripts again and sends the transaction once more.
 */
describe('C1: a deferral after the scripts were flushed from Redis', () => {
  it('SCRIPT FLUSH after start-up: the next deferrals are written all the same', async () => {
    // a server of its own: a SCRIPT FLUSH on the shared one would fail other files' scripts
    const server = await startPrivateRedis();
    const admin = new IORedis({ port: server.port });
    // by hand, not harness(): the engine is on the private server
    const engine = createDispatchEngine<unknown, string>({
      connection: { host: '127.0.0.1', port: server.port },
      prefix: 'flushed',
      executor: async () => notSent('no_worker_available'),
    });
    try {
      const first = { ...image, stage: 'first' };
      expect(await engine.dispatchStage(first, {})).toMatchObject({ reason: 'no_worker_available' });
      expect(await engine.isStageDeferred(first)).toBe(true);
      await admin.script('FLUSH');
      for (const book of ['book-2', 'book-3']) {
        const ref = { ...image, scope: [book] };
        expect(await engine.dispatchStage(ref, {})).toMatchObject({ reason: 'no_worker_available' });
        expect(await engine.isStageDeferred(ref)).toBe(true);
      }
    } finally {
      await engine.close();
      admin.disconnect();
      await server.stop();
    }
  });
});
