import { envInt, rng, seedFor, LONG_MS } from './harness';
import { expectInvariantsKept, runFleet, summary, FAULT_POINTS, testRedisUrl } from './fleet';

/**
 * A worker killed (SIGKILL) mid-attempt leaves its job active and maybe its
 * dispatch lock; BullMQ's stalled-job check redelivers the job, the lock
 * expires after `lockMs`, and the stage carries on. Nothing may be lost.
 * Delivery is at least once: a kill after the executor answered `dispatched`
 * and before the job completed can dispatch that stage again, so duplicates
 * are allowed only for stages with an attempt open in a killed process.
 */
describe('C14: worker processes killed with SIGKILL and restarted', () => {
  it(
    'at each fault point on purpose: every stage still reaches its end',
    async () => {
      const rounds = envInt('CRASH_ROUNDS', 1, 6);
      const report = await runFleet({
        redisUrl: testRedisUrl(),
        recUrl: testRedisUrl(),
        processes: 3,
        concurrency: envInt('FLEET_CONCURRENCY', 10, 20),
        stages: envInt('CRASH_STAGES', 150, 3000),
        seed: seedFor('crash-points'),
        cancelRate: 0.05,
        faultPlan: FAULT_POINTS,
        faultRounds: rounds,
        deadlineMs: envInt('FLEET_DEADLINE_MS', 240_000, 900_000),
      });
      console.log(summary('crash-points', report));
      expectInvariantsKept(report);
      // every crash point was actually hit, `rounds` times
      expect(report.killsByPoint).toEqual(Object.fromEntries(FAULT_POINTS.map((p) => [p, rounds])));
    },
    LONG_MS,
  );

  it(
    'at random moments, many times in one run: lost = 0',
    async () => {
      const seed = seedFor('crash-random');
      const random = rng(seed);
      let kills = 0;
      const report = await runFleet(
        {
          redisUrl: testRedisUrl(),
          recUrl: testRedisUrl(),
          processes: 3,
          concurrency: envInt('FLEET_CONCURRENCY', 10, 20),
          stages: envInt('CRASH_STAGES', 150, 3000),
          seed,
          cancelRate: 0.05,
          deadlineMs: envInt('FLEET_DEADLINE_MS', 240_000, 900_000),
        },
        async (fleet, finished) => {
          let over = false;
          void finished.then(() => (over = true));
          const max = envInt('CRASH_KILLS', 6, 60);
          while (!over && kills < max) {
            await Promise.race([finished, new Promise((r) => setTimeout(r, 150 + random() * 600))]);
            if (over) break;
            if (await fleet.killOne(random)) kills += 1;
          }
        },
      );
      console.log(summary('crash-random', report), `parent kills: ${kills}`);
      expect(kills).toBeGreaterThan(0);
      expect(report.restarts).toBeGreaterThanOrEqual(kills);
      expectInvariantsKept(report);
    },
    LONG_MS,
  );
});
