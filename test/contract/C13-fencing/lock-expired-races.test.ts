import { UnrecoverableError } from 'bullmq';
import type IORedis from 'ioredis';
import type { StageRef } from '../../../src/types';
import { FREE, expireDispatchLockNow, failedRecordsOf, stageView, wakeUpOf } from '../../helpers/observe';
import { client, closeAll, closeClients, dropPrefix, isolated } from '../../helpers/redis';
import { ManualWorker, answer, engineFor, latch } from '../../reliability/harness';

let redis: IORedis;
beforeAll(() => {
  redis = client();
});
afterAll(closeClients);

const ref: StageRef = { scope: ['book', 'ch'], stage: 'image' };

describe('C13: a dispatch lock that expires before the deferral is recorded (a stall longer than lockMs)', () => {
  for (const which of ['ready job', 'wake-up'] as const) {
    it(`does not drop the stage: the ${which} comes back and the deferral is recorded then`, async () => {
      const { prefix, queueName } = isolated();
      let calls = 0;
      let expireOnCall = which === 'ready job' ? 1 : 2;
      const engine = engineFor(prefix, queueName, {
        executor: async () => {
          calls += 1;
          return answer('capacity');
        },
        // the lock's expiry, made deterministic: it is gone when the rollback returns
        rollback: async () => {
          if (calls === expireOnCall) await expireDispatchLockNow(redis, { prefix, queueName }, ref);
        },
        windows: { capacitySeconds: 60, jitter: 0 },
      });
      const worker = new ManualWorker(queueName, prefix);
      try {
        await engine.enqueue(ref, {});
        if (which === 'wake-up') {
          await worker.processNext(engine);
          await (await engine.queue.getJob(await wakeUpOf(engine, ref)))!.promote();
        }
        const first = await worker.processNext(engine);
        const jobId = first!.job.id as string;
        // nothing was recorded, but the job is still there to try again
        const mid = await stageView(engine, ref);
        expect(mid).toEqual({ deferred: false, listed: undefined, jobs: [jobId] });
        expireOnCall = 0;
        await (await engine.queue.getJob(jobId))!.promote();
        await worker.processNext(engine);
        const after = await stageView(engine, ref);
        expect(after).toEqual({
          deferred: true,
          listed: { class: 'capacity', deferrals: expect.any(Number), wakeUpJobId: expect.any(String) },
          jobs: [after.listed?.wakeUpJobId],
        });
      } finally {
        await worker.close();
        await engine.close();
        await dropPrefix(redis, prefix);
      }
    });
  }
});

describe('C13: an attempt that outlived its lock (a stall) and then fails for good', () => {
  // Found by the operations fleet test: a worker frozen past lockMs, whose job was redelivered and
  // dispatched elsewhere meanwhile, must not record `<job id>?` for a job that no longer exists (its
  // late release finds the lock lost and ends as `lost`; FAIL records nothing for a missing job).
  it('leaves no licence member behind once the redelivered job dispatched the stage', async () => {
    const { prefix, queueName } = isolated();
    const base = `${prefix}:${queueName}:`;
    const entered = latch();
    const release = latch<Error>();
    const frozen = engineFor(prefix, queueName, {
      executor: async () => {
        entered.open();
        throw await release.promise;
      },
    });
    const other = engineFor(prefix, queueName, { executor: async () => answer('dispatched') });
    const first = new ManualWorker(queueName, prefix);
    const second = new ManualWorker(queueName, prefix);
    try {
      await other.enqueue(ref, {});
      const taken = (await first.fetch())!;
      const stale = first.run(frozen, taken.job, taken.token);
      await entered.promise;
      // the worker freezes: its dispatch lock expires, its job lock lapses, the stalled check redelivers the job
      await expireDispatchLockNow(redis, { prefix, queueName }, ref);
      await redis.del(`${base}${taken.job.id}:lock`);
      await second.stalledCheck(redis, prefix, queueName);
      await second.stalledCheck(redis, prefix, queueName);
      const again = await second.processNext(other);
      expect(again).toMatchObject({ result: { dispatched: true } });
      expect(await other.queue.getJob(taken.job.id as string)).toBeUndefined();
      // the frozen worker resumes; its executor fails for good
      release.open(new UnrecoverableError('refused for good'));
      await stale.catch(() => undefined);
      // the stage is not held: not deferred, no job, and no failure on record (internal: a record
      // of a job that no longer exists is memory only, dropped by the stage's next enqueue)
      expect(await stageView(other, ref)).toEqual(FREE);
      expect(await failedRecordsOf(redis, { prefix, queueName }, ref)).toEqual([]);
    } finally {
      await closeAll(redis, prefix, first, second, frozen, other);
    }
  });
});
