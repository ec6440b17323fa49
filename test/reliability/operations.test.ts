import { envInt, rng, seedFor, LONG_MS } from './harness';
import { expectInvariantsKept, runFleet, summary, testRedisUrl } from './fleet';

/**
 * What a deployment does besides crashing: an operator retries failed jobs by
 * hand, workers are stopped gracefully mid-flight (SIGTERM: engine.close()
 * aborts the running executors, their jobs go back) and restarted, and a
 * worker freezes (SIGSTOP) for longer than its job lock, so its jobs are
 * redelivered to the others, then resumes (SIGCONT) with its executors still
 * running. Some calls fail for good (the job waits for the operator). Nothing
 * may be lost, nothing may run inside a window, and two calls of a stage run
 * at once only across a freeze, where the fencing token refuses the older one.
 */
describe('C14: retries by hand, graceful closes and stalls in a fleet of worker processes', () => {
  it(
    'lost = 0, no call inside a window, no overlapping calls of a stage the freeze does not explain',
    async () => {
      const seed = seedFor('operations');
      const random = rng(seed);
      const closesWanted = envInt('OPS_CLOSES', 3, 20);
      const stallsWanted = envInt('OPS_STALLS', 2, 10);
      const report = await runFleet(
        {
          redisUrl: testRedisUrl(),
          recUrl: testRedisUrl(),
          processes: 3,
          concurrency: envInt('FLEET_CONCURRENCY', 10, 20),
          stages: envInt('OPS_STAGES', 600, 3000),
          seed,
          cancelRate: 0.05,
          execMs: 150,
          terminalRate: 0.15,
          retryByHandEveryMs: 300,
          wakeEveryMs: 400,
          deadlineMs: envInt('FLEET_DEADLINE_MS', 240_000, 900_000),
        },
        async (fleet, finished) => {
          let over = false;
          void finished.then(() => (over = true));
          // begin once executors are running, so a close or a freeze catches some mid-flight
          await fleet.afterCalls(100, () => over);
          let closes = 0;
          let stalls = 0;
          // a close and a freeze first (the fleet may drain soon after), then at random
          for (let k = 0; !over && (closes < closesWanted || stalls < stallsWanted); k++) {
            const stall = stalls < stallsWanted && (closes >= closesWanted || k === 1 || (k > 1 && random() < 0.5));
            // a freeze longer than BullMQ's lockDuration (1 s) plus a stalled-check interval and the engine's lockMs (1 s)
            if (stall) stalls += Number(await fleet.stallOne(random, 2500 + Math.floor(random() * 1000)));
            else closes += Number(await fleet.closeOne(random));
            await Promise.race([finished, new Promise((r) => setTimeout(r, 100 + random() * 400))]);
          }
        },
      );
      console.log(summary('operations', report));
      expectInvariantsKept(report);
      expect(report.failedForGood).toBeGreaterThan(0);
      expect(report.retriesByHand).toBeGreaterThan(0);
      expect(report.wokenEarly).toBeGreaterThan(0);
      expect(report.closes).toBeGreaterThan(0);
      expect(report.callsAbortedByClose).toBeGreaterThan(0);
      expect(report.stalls).toBeGreaterThan(0);
      expect(report.restarts).toBeGreaterThanOrEqual(report.closes);
    },
    LONG_MS,
  );
});
