import IORedis from 'ioredis';
import { createDispatchEngine, type StageRef } from '../../../src';
import { SENT } from '../../helpers/engine';
import { client, closeClients, dropPrefix, isolated, redisOptions } from '../../helpers/redis';

const ref: StageRef = { scope: ['book-1'], stage: 'image' };

afterAll(closeClients);

describe('C24: a call under way when close() begins ends ENGINE_CLOSED, whatever ends it', () => {
  it("the user quits their own connection while close() runs: each call rejects ENGINE_CLOSED, not ioredis' error", async () => {
    const { prefix, queueName } = isolated();
    const redis = new IORedis({ ...redisOptions(), maxRetriesPerRequest: null });
    const engine = createDispatchEngine<unknown, string>({
      connection: redis,
      prefix,
      queueName,
      executor: async () => SENT,
    });
    try {
      const calls = [
        engine.enqueue(ref, {}),
        engine.waitUntilReady(),
        engine.listDeferred(),
        engine.isStageDeferred(ref),
      ];
      const closing = engine.close();
      await new Promise((r) => setImmediate(r));
      void redis.quit();
      const codes = await Promise.all(
        calls.map((p) =>
          p.then(
            () => 'resolved',
            (e: { code?: string }) => e.code,
          ),
        ),
      );
      expect(codes).toEqual(['ENGINE_CLOSED', 'ENGINE_CLOSED', 'ENGINE_CLOSED', 'ENGINE_CLOSED']);
      await closing;
    } finally {
      redis.disconnect();
      await dropPrefix(client(), prefix);
    }
  });
});
