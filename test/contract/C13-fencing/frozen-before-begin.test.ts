import type IORedis from 'ioredis';
import type { DispatchEngine } from '../../../src/engine';
import type { StageRef } from '../../../src/types';
import { stageView, wakeUpOf } from '../../helpers/observe';
import { client, closeAll, closeClients, isolated } from '../../helpers/redis';
import {
  ManualWorker,
  answer,
  engineFor,
  type Outcome,
  countingEngine,
  capacityEngine,
} from '../../reliability/harness';

let redis: IORedis;
beforeAll(() => {
  redis = client();
});
afterAll(closeClients);

const ref: StageRef = { scope: ['book', 'ch'], stage: 'image' };

/**
 * The stage's job is enqueued and fetched by `first`, which then freezes before its begin: its
 * BullMQ lock lapses, and `second`'s stalled check puts the job back in wait. Returns what `first` holds.
 */
async function frozenAfterFetch(engine: DispatchEngine, first: ManualWorker, second: ManualWorker) {
  const [prefix, name] = [engine.queue.opts.prefix!, engine.queue.name];
  await engine.enqueue(ref, {});
  const taken = (await first.fetch())!;
  await redis.del(`${prefix}:${name}:${taken.job.id}:lock`);
  await second.stalledCheck(redis, prefix, name);
  await second.stalledCheck(redis, prefix, name);
  return taken;
}

describe('C13: a worker frozen between fetching its job and beginning it (a GC pause, a SIGSTOP)', () => {
  // Found by the operations fleet test under load: the job was redelivered, deferred by another worker
  // and removed; the frozen worker then began it, called the executor, and on a real failure took the
  // stage's licence for a job that no longer existed (revoking the wake-up): the stage was lost.
  for (const late of ['failure', 'dispatched'] as Outcome[]) {
    it(`its late begin does nothing once the redelivered job finished (late answer: ${late})`, async () => {
      const { prefix, queueName } = isolated();
      const { engine: other, calls: otherCalls } = capacityEngine(prefix, queueName);
      let frozenCalls = 0;
      const frozen = engineFor(prefix, queueName, {
        executor: async () => {
          frozenCalls += 1;
          if (late === 'failure') throw new Error('down');
          return answer('dispatched');
        },
        retry: { attempts: 3, backoff: { type: 'fixed', delay: 0 } },
      });
      const first = new ManualWorker(queueName, prefix);
      const second = new ManualWorker(queueName, prefix);
      try {
        const taken = await frozenAfterFetch(other, first, second);
        const again = await second.processNext(other);
        expect(again).toMatchObject({ result: { reason: 'no_worker_available' } });
        expect(otherCalls()).toBe(1);
        // capacity returns: the window ends early, the wake-up is promoted (in the fleet, by wakeDeferred)
        const wakeUp = await wakeUpOf(other, ref);
        expect((await other.wakeDeferred()).woken).toEqual([ref]);
        // woken: no longer deferred, its wake-up waiting to run
        const deferred = await stageView(other, ref);
        expect(deferred).toEqual({ deferred: false, listed: undefined, jobs: [wakeUp] });
        // the frozen worker resumes and runs the job it fetched, with the token it no longer holds
        // (the processor leaves the job to BullMQ: a DelayedError, no move of a job it no longer holds)
        expect(await first.run(frozen, taken.job, taken.token)).toMatchObject({ error: { name: 'DelayedError' } });
        expect(frozenCalls).toBe(0);
        // the woken wake-up stands, waiting to run; no job made again of the removed one
        expect(await stageView(other, ref)).toEqual(deferred);
        expect(await other.queue.getJob(taken.job.id as string)).toBeUndefined();
        // and it carries the stage on: it runs, and its executor is asked
        expect(await second.processNext(other)).toMatchObject({ result: { reason: 'no_worker_available' } });
        expect(otherCalls()).toBe(2);
      } finally {
        await closeAll(redis, prefix, first, second, frozen, other);
      }
    });
  }

  // Found by the review of the fix above: the same freeze, but the redelivered job has not run yet
  it('its late begin does nothing while the redelivered job waits: the stage is dispatched once, by the redelivery', async () => {
    const { prefix, queueName } = isolated();
    const { engine, calls } = countingEngine(prefix, queueName, 'dispatched');
    const first = new ManualWorker(queueName, prefix);
    const second = new ManualWorker(queueName, prefix);
    try {
      const taken = await frozenAfterFetch(engine, first, second);
      // the frozen worker resumes first: BullMQ's lock of its job is gone, the job waits for another
      expect(await first.run(engine, taken.job, taken.token)).toMatchObject({ error: { name: 'DelayedError' } });
      expect(calls()).toBe(0);
      const again = await second.processNext(engine);
      expect(again).toMatchObject({ job: { id: taken.job.id }, result: { dispatched: true } });
      expect(calls()).toBe(1);
    } finally {
      await closeAll(redis, prefix, first, second, engine);
    }
  });
});
