import IORedis from 'ioredis';
import { createDispatchEngine } from '../../src/engine';
import { redisOptions, waitFor } from '../helpers/redis';
import { PrivateRedis } from '../helpers/private-redis';
import { envInt, rng, seedFor, LONG_MS } from './harness';
import { expectInvariantsKept, runFleet, summary } from './fleet';

const recUrl = () => `redis://${redisOptions().host}:${redisOptions().port}`;

/** The server's `run_id` (INFO server): a new one each time redis-server starts. */
async function runIdOf(url: string): Promise<string> {
  const c = new IORedis(url, { maxRetriesPerRequest: 1, retryStrategy: () => null });
  c.on('error', () => undefined);
  try {
    const info = await c.info('server');
    return /^run_id:(\w+)/m.exec(info)![1]!;
  } finally {
    c.disconnect();
  }
}

/**
 * The engine's Redis is a private `redis-server --appendonly yes
 * --appendfsync always`, SIGKILLed and restarted mid-run on the same port
 * and dir, and its client connections are dropped with `CLIENT KILL`. The
 * children record what they see in the shared test Redis, which stays up.
 */
describe('C14: Redis killed and restarted, connections dropped', () => {
  let redis: PrivateRedis;
  beforeAll(async () => {
    redis = await PrivateRedis.start(['--appendonly', 'yes', '--appendfsync', 'always', '--save', '']);
  });
  afterAll(async () => {
    await redis.stop();
  });

  it(
    'workers reconnect and resume; no deferred stage is lost, none runs twice in its window',
    async () => {
      const seed = seedFor('redis-faults');
      const random = rng(seed);
      const restarts = envInt('REDIS_RESTARTS', 2, 6);
      const clientKills = envInt('CLIENT_KILLS', 3, 10);
      let done = { restarts: 0, clientKills: 0, dropped: 0 };
      // every server that answered during the run, by run_id: proof that the restarts happened
      const runIds = new Set<string>([await runIdOf(redis.url)]);
      const report = await runFleet(
        {
          redisUrl: redis.url,
          recUrl: recUrl(),
          processes: 3,
          concurrency: envInt('FLEET_CONCURRENCY', 10, 20),
          stages: envInt('REDIS_FAULT_STAGES', 300, 3000),
          seed,
          cancelRate: 0.05,
          deadlineMs: envInt('FLEET_DEADLINE_MS', 240_000, 900_000),
        },
        async (_fleet, finished) => {
          let over = false;
          void finished.then(() => (over = true));
          const pause = (ms: number) => Promise.race([finished, new Promise((r) => setTimeout(r, ms))]);
          const admin = new IORedis(redis.url, { maxRetriesPerRequest: null });
          admin.on('error', () => undefined);
          // a client kill and a restart first, soon after the start, so that a run that drains fast
          // (under a second here) still meets both; the rest in a random order
          const plan = [
            'client-kill',
            'restart',
            ...[...Array(restarts - 1).fill('restart'), ...Array(clientKills - 1).fill('client-kill')].sort(
              () => random() - 0.5,
            ),
          ];
          for (const [i, step] of plan.entries()) {
            await pause(i < 2 ? 50 + random() * 100 : 300 + random() * 700);
            if (over) break;
            if (step === 'restart') {
              await redis.kill9();
              await pause(200 + random() * 500);
              await redis.restart();
              runIds.add(await runIdOf(redis.url));
              done.restarts += 1;
            } else {
              done.dropped += Number(
                await (admin.call('CLIENT', 'KILL', 'TYPE', 'normal') as Promise<number>).catch(() => 0),
              );
              done.clientKills += 1;
            }
          }
          admin.disconnect();
        },
      );
      console.log(`${summary('redis-faults', report)}\n  redis: ${JSON.stringify({ ...done, servers: runIds.size })}`);
      // the faults really happened: each restart brought up a new server (new run_id), and at least one did
      expect(done.restarts).toBeGreaterThanOrEqual(1);
      expect(runIds.size).toBe(done.restarts + 1);
      expect(done.clientKills).toBeGreaterThanOrEqual(1);
      expectInvariantsKept(report);
      done = { restarts: 0, clientKills: 0, dropped: 0 };
    },
    LONG_MS,
  );
});

describe('C14: a Redis without persistence, restarted', () => {
  it('keeps nothing: the deferral, its licence and its wake-up are all gone (state this in the docs)', async () => {
    const volatile = await PrivateRedis.start(['--appendonly', 'no', '--save', '']);
    const u = new URL(volatile.url);
    // by hand, not harness(): the engine is on the private server this test restarts
    const engine = createDispatchEngine({
      connection: { host: u.hostname, port: Number(u.port), maxRetriesPerRequest: null } as never,
      prefix: 'vol',
      queueName: 'q',
      executor: async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),
      windows: { capacitySeconds: 600 },
    });
    engine.queue.on('error', () => undefined);
    const ref = { scope: ['a'], stage: 's' };
    try {
      expect(await engine.dispatchStage(ref, {})).toMatchObject({ dispatched: false, until: expect.any(Number) });
      expect(await engine.listDeferred()).toHaveLength(1);
      await volatile.restart();
      await waitFor(
        async () => (await engine.queue.getJobCounts('delayed')).delayed === 0,
        'the restarted Redis to answer',
      );
      expect(await engine.isStageDeferred(ref)).toBe(false);
      expect(await engine.listDeferred()).toEqual([]);
    } finally {
      await engine.close();
      await volatile.stop();
    }
  });
});
