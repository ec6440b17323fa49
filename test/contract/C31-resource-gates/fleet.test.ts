import { envInt, rng, seedFor, LONG_MS } from '../../reliability/harness';
import { expectInvariantsKept, runFleet, summary, FAULT_POINTS, testRedisUrl } from '../../reliability/fleet';

/**
 * Gates in a fleet of worker processes (test/reliability/fleet.ts): every stage needs one of three
 * resources, so capacity answers close gates, dispatches at a closed gate defer with no call, and
 * successes wake the lines, while processes are killed at each fault point, stopped gracefully and
 * frozen past their locks, and the parent wakes whole resources now and then. The fleet's checks
 * are C14's: nothing lost, no second dispatch a death does not explain, no call inside a window
 * (a line's wake, made in a child, ends the windows it woke), one licence and one wake-up per stage.
 */
describe('C31: gates in a fleet of worker processes killed, closed and frozen', () => {
  it(
    'lost = 0, no call inside a window, gated deferrals made and lines woken',
    async () => {
      const seed = seedFor('gates');
      const random = rng(seed);
      const report = await runFleet(
        {
          redisUrl: testRedisUrl(),
          recUrl: testRedisUrl(),
          processes: 3,
          concurrency: envInt('FLEET_CONCURRENCY', 10, 20),
          stages: envInt('GATE_STAGES', 300, 3000),
          seed,
          resources: 3,
          cancelRate: 0.05,
          execMs: 40,
          faultPlan: FAULT_POINTS,
          wakeEveryMs: 500,
          deadlineMs: envInt('FLEET_DEADLINE_MS', 240_000, 900_000),
        },
        async (fleet, finished) => {
          let over = false;
          void finished.then(() => (over = true));
          await fleet.afterCalls(100, () => over);
          // a graceful close and a freeze longer than the job lock and lockMs, once each
          if (!over) await fleet.closeOne(random);
          if (!over) await fleet.stallOne(random, 2500 + Math.floor(random() * 1000));
        },
      );
      console.log(summary('gates', report));
      expectInvariantsKept(report);
      // one kill planned at each point; the last may find the fleet drained (most deferrals here are gated ones)
      const kills = Object.values(report.killsByPoint).reduce((a, b) => a + b, 0);
      expect(kills).toBeGreaterThanOrEqual(FAULT_POINTS.length - 1);
      expect(report.gatedDeferrals).toBeGreaterThan(0);
      expect(report.wokenByLine).toBeGreaterThan(0);
      expect(report.wokenEarly).toBeGreaterThan(0);
    },
    LONG_MS,
  );
});
