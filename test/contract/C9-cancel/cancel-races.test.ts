import type IORedis from 'ioredis';
import type { DispatchResult, ExecutorResult, StageRef } from '../../../src/types';
import { FREE, stageView } from '../../helpers/observe';
import { client, closeClients, dropPrefix, isolated } from '../../helpers/redis';
import { ManualWorker, answer, engineFor, latch, type Outcome, capacityEngine } from '../../reliability/harness';

let redis: IORedis;
beforeAll(() => {
  redis = client();
});
afterAll(closeClients);

const ref: StageRef = { scope: ['book', 'ch'], stage: 'image' };

describe('C9: a cancel arriving while the executor of that stage is in flight', () => {
  for (const outcome of ['capacity', 'idempotent', 'failure', 'dispatched'] as Outcome[]) {
    for (const via of ['dispatchStage', 'worker'] as const) {
      it(`leaves no deferral behind when the late answer is ${outcome} (${via})`, async () => {
        const { prefix, queueName } = isolated();
        const entered = latch();
        const release = latch<ExecutorResult<string>>();
        let calls = 0;
        const engine = engineFor(prefix, queueName, {
          executor: async () => {
            calls += 1;
            entered.open();
            return release.promise;
          },
          windows: { capacitySeconds: 60, idempotentSeconds: 60, jitter: 0 },
          retry: { attempts: 1, backoff: { type: 'fixed', delay: 0 } },
        });
        const worker = new ManualWorker(queueName, prefix);
        try {
          let running: Promise<unknown>;
          if (via === 'dispatchStage') {
            running = engine.dispatchStage(ref, {}).catch((e: Error) => e);
          } else {
            await engine.enqueue(ref, {});
            running = worker.processNext(engine);
          }
          await entered.promise;
          const cancel = await engine.cancelActiveDispatch(ref, 'user');
          expect(cancel).toMatchObject({ inFlight: true, hadDeferral: false });
          release.open(answer(outcome));
          const result = await running;
          // what the attempt reports: a late success stands (it was sent); anything else is cancelled
          const expected =
            outcome === 'dispatched'
              ? { dispatched: true, reason: null }
              : { dispatched: false, reason: answer(outcome).reason, cancelled: true };
          if (via === 'dispatchStage') {
            expect(result as DispatchResult).toMatchObject(expected);
          } else {
            // the worker's job completes with that result: no error, so BullMQ does not retry it
            const processed = result as { job: { id?: string }; result?: unknown; error?: Error };
            expect(processed.error).toBeUndefined();
            expect(processed.result as DispatchResult).toMatchObject(expected);
          }
          // the late result did not re-create the deferral, nor leave a wake-up or the lock
          expect(await stageView(engine, ref)).toEqual(FREE);
          expect(calls).toBe(1);
          // and the stage can be enqueued afresh (not deferred, not in flight), and its job dispatches it
          expect(await engine.enqueue(ref, {})).toMatchObject({ added: true });
          expect(await worker.processNext(engine)).toMatchObject({ job: { id: expect.any(String) } });
          expect(calls).toBe(2);
        } finally {
          await worker.close();
          await engine.close();
          await dropPrefix(redis, prefix);
        }
      });
    }
  }
});

describe('C9: a cancel arriving after a worker picked the job up but before its dispatch began', () => {
  // The job is active, so `queue.remove` cannot remove it, and it holds no
  // dispatch lock yet, so the cancel cannot mark it either: the cancel deletes
  // the stage's deduplication key, and the job's begin, finding it no longer
  // names the job, stops.
  it('does not call the executor nor record a deferral afterwards', async () => {
    const { prefix, queueName } = isolated();
    const { engine, calls } = capacityEngine(prefix, queueName);
    const worker = new ManualWorker(queueName, prefix);
    try {
      await engine.enqueue(ref, {});
      const job = await worker.worker.getNextJob('t1', { block: false });
      await engine.cancelActiveDispatch(ref, 'user');
      const result = await engine.processor(job!, 't1');
      await job!.moveToCompleted(result, 't1', false);
      expect(calls()).toBe(0);
      expect(await stageView(engine, ref)).toEqual(FREE);
      // and the stage goes on: enqueued again, its job asks the executor
      expect(await engine.enqueue(ref, {})).toMatchObject({ added: true });
      expect(await worker.processNext(engine)).toMatchObject({ result: { reason: 'no_worker_available' } });
      expect(calls()).toBe(1);
    } finally {
      await worker.close();
      await engine.close();
      await dropPrefix(redis, prefix);
    }
  });
});
