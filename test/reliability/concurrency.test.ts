import { envInt, seedFor, LONG_MS } from './harness';
import { expectSampled, runFleet, summary, testRedisUrl } from './fleet';

describe('C14: several worker processes over many stages', () => {
  it(
    'dispatches every stage that is not cancelled exactly once, with one wake-up at most and nothing left over',
    async () => {
      const report = await runFleet({
        redisUrl: testRedisUrl(),
        recUrl: testRedisUrl(),
        processes: envInt('FLEET_PROCESSES', 3, 4),
        concurrency: envInt('FLEET_CONCURRENCY', 10, 20),
        stages: envInt('FLEET_STAGES', 600, 5000),
        seed: seedFor('concurrency'),
        cancelRate: 0.1,
        workerLockMs: 30_000,
        deadlineMs: envInt('FLEET_DEADLINE_MS', 240_000, 900_000),
      });
      console.log(summary('concurrency', report));
      expect(report.lost).toEqual([]);
      expect(report.duplicated).toEqual([]);
      expect(report.windowViolations).toEqual([]);
      expect(report.overlaps).toEqual([]);
      // nothing froze or stalled: no call outlived its lock
      expect(report.overlapsAfterStall).toBe(0);
      expect(report.staleStarts).toBe(0);
      expect(report.crowded).toEqual([]);
      expect(report.maxLicencesPerStage).toBeLessThanOrEqual(1);
      expect(report.maxQueuedJobsPerStage).toBeLessThanOrEqual(1);
      expect(report.maxWakeUpsPerStage).toBeLessThanOrEqual(1);
      expectSampled(report);
      expect(report.orphans).toEqual([]);
      expect(report.cancelled).toBeGreaterThan(0);
      expect(report.deferrals).toBeGreaterThan(0);
    },
    LONG_MS,
  );
});
