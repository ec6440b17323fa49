import { harness, notSent, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { DispatchResult, ExecutorResult, StageRef } from '../../../src';

/**
 * A worker freezes (a GC pause) while its executor runs, past BullMQ's job lock but well within
 * the engine's `lockMs`; BullMQ's stalled check fails the job for good (maxStalledCount spent:
 * 0 here, the default 1 on a second stall; BullMQ 6 fails it when a worker next fetches it, here
 * the same Worker's second slot) and, with the Worker's `removeOnFail`, removes it. The stage
 * lock lives by its own TTL, whatever became of the job: another host finds the stage in flight,
 * and the frozen attempt's answer still counts.
 */
const image: StageRef = { scope: ['book-27', 'ch-2', 'sc-1'], stage: 'image' };

describe('C12: a job failed (and removed) by the stalled check while its executor still runs', () => {
  it.each([
    ['kept', 'sends', SENT, false, false],
    ['removed (removeOnFail)', 'sends', SENT, false, true],
    ['removed (removeOnFail)', 'answers capacity', notSent('no_worker_available'), true, true],
  ] as [string, string, ExecutorResult<string>, boolean, boolean][])(
    'failed and %s: another host finds the stage in flight, and the frozen attempt that then %s is the one that counts',
    async (_k, _n, answer, deferred, removed) => {
      const h = harness({ lockMs: 60_000, windows: { capacitySeconds: 60, jitter: 0 } });
      const other = harness({ lockMs: 60_000 }, { prefix: h.prefix, queueName: h.queueName });
      const redis = client();
      let direct: DispatchResult | undefined;
      const outcome: string[] = [];
      h.engine.on('deferred', () => outcome.push('deferred'));
      h.engine.on('dispatched', () => outcome.push('dispatched'));
      const { jobId } = await h.engine.enqueue(image, {});
      const jobKey = `${h.prefix}:${h.queueName}:${jobId}`;
      h.executor.script(image, async () => {
        // frozen: BullMQ's lock of the job lapses, its stalled check fails the job (and removes it)
        await redis.del(`${jobKey}:lock`);
        await waitFor(
          async () => (removed ? (await redis.exists(jobKey)) === 0 : !!(await redis.hget(jobKey, 'finishedOn'))),
          'failed by the stalled check',
          10_000,
        );
        direct = await other.engine.dispatchStage(image, {});
        return answer;
      });
      const worker = h.engine.createWorker({
        stalledInterval: 300,
        maxStalledCount: 0,
        concurrency: 2,
        ...(removed ? { removeOnFail: { count: 0 } } : {}),
      });
      worker.on('error', () => undefined);
      const { failed } = watch(worker);
      await waitFor(() => h.executor.callsFor(image) === 1 && direct !== undefined, 'the direct call answered', 20_000);
      await waitFor(() => failed.length === 1, 'BullMQ failed the job');
      expect(direct).toMatchObject({ dispatched: false, reason: 'dispatch_in_flight' });
      expect(other.executor.callsFor(image)).toBe(0);
      // the frozen attempt's answer stands: a capacity answer is a deferral with its wake-up
      await waitFor(() => outcome.length === 1, 'the frozen attempt answered');
      expect(outcome).toEqual([deferred ? 'deferred' : 'dispatched']);
      expect(await h.engine.isStageDeferred(image)).toBe(deferred);
      expect(await h.engine.listDeferred()).toHaveLength(deferred ? 1 : 0);
    },
    40_000,
  );
});
