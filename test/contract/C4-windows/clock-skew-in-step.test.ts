import { createDispatchEngine } from '../../../src';
import { PrivateRedis } from '../../helpers/private-redis';
import { isolated } from '../../helpers/redis';

/**
 * A Redis on this host reads the very clock the engine reads: this host leads it by nothing, so
 * even `maxClockSkewMs: 0` ("leads by more than 0") must not report it. Each engine's start-up
 * reading is one sample; 40 of them (a report of 1-2 ms showed in about 1 start-up in 5).
 */
describe('C4: a Worker host in step with Redis is not reported, even at maxClockSkewMs 0', () => {
  let redis: PrivateRedis;
  beforeAll(async () => {
    redis = await PrivateRedis.start();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('C4: no clockSkew at start-up from a Redis on the same host (40 start-ups)', async () => {
    const skews: unknown[] = [];
    for (let i = 0; i < 40; i++) {
      const engine = createDispatchEngine({
        connection: { host: '127.0.0.1', port: redis.port },
        ...isolated(),
        executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
        maxClockSkewMs: 0,
      });
      engine.on('clockSkew', (e) => skews.push(e));
      // read for a Worker: this host is watched from here on
      expect(typeof engine.processor).toBe('function');
      await engine.waitUntilReady();
      await engine.close();
    }
    expect(skews).toEqual([]);
  }, 60_000);
});
