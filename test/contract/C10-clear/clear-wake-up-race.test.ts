import type IORedis from 'ioredis';
import type { StageRef } from '../../../src/types';
import { stageView, wakeUpOf } from '../../helpers/observe';
import { client, closeClients, dropPrefix, isolated } from '../../helpers/redis';
import {
  ManualWorker,
  answer,
  engineFor,
  envInt,
  latch,
  type Outcome,
  capacityEngine,
} from '../../reliability/harness';

let redis: IORedis;
beforeAll(() => {
  redis = client();
});
afterAll(closeClients);

const ref: StageRef = { scope: ['book', 'ch'], stage: 'image' };

describe('C10: a clear arriving while a wake-up fires', () => {
  async function deferredStage(prefix: string, queueName: string, script: Outcome[]) {
    let calls = 0;
    const engine = engineFor(prefix, queueName, {
      executor: async () => answer(script[calls++] ?? 'dispatched'),
      windows: { capacitySeconds: 60, idempotentSeconds: 60, jitter: 0 },
    });
    const worker = new ManualWorker(queueName, prefix);
    await engine.enqueue(ref, {});
    await worker.processNext(engine); // deferred (capacity)
    return { engine, worker, licence: await wakeUpOf(engine, ref), calls: () => calls };
  }

  it('between the wake-up being fetched and its begin: one executor call, the chain starts fresh', async () => {
    const { prefix, queueName } = isolated();
    const { engine, worker, licence, calls } = await deferredStage(prefix, queueName, ['capacity', 'capacity']);
    try {
      await (await engine.queue.getJob(licence))!.promote(); // the window ends early; the marker is still there
      const job = await worker.worker.getNextJob('t1', { block: false });
      expect(job?.id).toBe(licence);
      expect(await engine.clearDeferrals(['book'])).toBe(1); // races the wake-up: promote of an active job is a no-op
      const result = await engine.processor(job!, 't1');
      await job!.moveToCompleted(result, 't1', false);
      expect(calls()).toBe(2);
      const after = await stageView(engine, ref);
      // deferred again, by a fresh chain (capacity count 1, not 2), its one wake-up waiting
      expect(after).toEqual({
        deferred: true,
        listed: { class: 'capacity', deferrals: 1, wakeUpJobId: expect.any(String) },
        jobs: [after.listed?.wakeUpJobId],
      });
    } finally {
      await worker.close();
      await engine.close();
      await dropPrefix(redis, prefix);
    }
  });

  it('while the woken stage is in its executor: the clear finds nothing to end, and one wake-up remains', async () => {
    const { prefix, queueName } = isolated();
    const entered = latch();
    const go = latch();
    let calls = 0;
    const engine = engineFor(prefix, queueName, {
      executor: async () => {
        calls += 1;
        if (calls === 2) {
          entered.open();
          await go.promise;
        }
        return answer(calls < 3 ? 'capacity' : 'dispatched');
      },
      windows: { capacitySeconds: 60, jitter: 0 },
    });
    const worker = new ManualWorker(queueName, prefix);
    try {
      await engine.enqueue(ref, {});
      await worker.processNext(engine);
      await (await engine.queue.getJob(await wakeUpOf(engine, ref)))!.promote();
      const running = worker.processNext(engine);
      await entered.promise;
      expect(await engine.clearDeferrals(['book'])).toBe(0);
      go.open();
      await running;
      // deferred again by the woken run (its chain going on), one wake-up
      const after = await stageView(engine, ref);
      expect(after).toEqual({
        deferred: true,
        listed: { class: 'capacity', deferrals: 2, wakeUpJobId: expect.any(String) },
        jobs: [after.listed?.wakeUpJobId],
      });
      expect(calls).toBe(2);
    } finally {
      await worker.close();
      await engine.close();
      await dropPrefix(redis, prefix);
    }
  });

  it('at the same moment, many times: exactly one executor call per wake-up and one way back', async () => {
    const iterations = envInt('RACE_ITERATIONS', 40, 1000);
    const { prefix, queueName } = isolated();
    const { engine, calls } = capacityEngine(prefix, queueName, { limits: { maxCapacityDeferrals: 1_000_000 } });
    const worker = new ManualWorker(queueName, prefix);
    try {
      await engine.enqueue(ref, {});
      await worker.processNext(engine);
      for (let i = 0; i < iterations; i++) {
        await (await engine.queue.getJob(await wakeUpOf(engine, ref)))!.promote();
        const before = calls();
        await Promise.all([worker.processNext(engine), engine.clearDeferrals(['book'])]);
        // the clear may have promoted nothing (the wake-up already ran) or ended the new deferral:
        // either way one more processing drains whatever is waiting
        while (((await engine.queue.getJobCounts('wait')).wait ?? 0) > 0) await worker.processNext(engine);
        expect(calls() - before).toBeGreaterThanOrEqual(1);
        expect(calls() - before).toBeLessThanOrEqual(2);
        // deferred again, by one wake-up: the one the next round promotes
        const s = await stageView(engine, ref);
        expect({ i, deferred: s.deferred, jobs: s.jobs }).toEqual({ i, deferred: true, jobs: [s.listed?.wakeUpJobId] });
      }
      // nothing left in flight: a cancel finds the deferral only
      expect(await engine.cancelActiveDispatch(ref)).toMatchObject({ hadDeferral: true, inFlight: false });
    } finally {
      await worker.close();
      await engine.close();
      await dropPrefix(redis, prefix);
    }
  }, 120_000);
});
