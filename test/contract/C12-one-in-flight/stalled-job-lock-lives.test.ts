import { type Harness, harness, notSent, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { ExecutorResult, StageRef } from '../../../src';

/**
 * A worker freezes (a GC pause) while its executor runs, past BullMQ's job lock but well within
 * the engine's `lockMs`; BullMQ's stalled check fails the job for good (maxStalledCount spent:
 * 0 here, the default 1 on a second stall; BullMQ 6 fails it when a worker next fetches it, here
 * the same Worker's second slot) and, with the Worker's `removeOnFail`, removes it. The stage
 * lock lives by its own TTL, whatever became of the job: another host finds the stage in flight,
 * and the frozen attempt's answer still counts.
 */
const image: StageRef = { scope: ['book-27', 'ch-2', 'sc-1'], stage: 'image' };

/**
 * The stage's job runs on `h`; its executor freezes until BullMQ's stalled check has failed the
 * job (and, `removed`, removed it), then runs `meanwhile` on a second host of the queue and
 * answers `answer`. Resolves once BullMQ failed the job and the frozen attempt answered, with
 * what `meanwhile` resolved and the engine events of `h` ('deferred' / 'dispatched').
 */
async function frozenPastStalledCheck<T>(
  answer: ExecutorResult<string>,
  removed: boolean,
  meanwhile: (other: Harness) => Promise<T>,
) {
  const h = harness({ lockMs: 60_000, windows: { capacitySeconds: 60, jitter: 0 } });
  const other = harness({ lockMs: 60_000 }, { prefix: h.prefix, queueName: h.queueName });
  const redis = client();
  let seen: { value: T } | undefined;
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
    seen = { value: await meanwhile(other) };
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
  await waitFor(() => h.executor.callsFor(image) === 1 && seen !== undefined, 'the other host answered', 20_000);
  await waitFor(() => failed.length === 1, 'BullMQ failed the job');
  await waitFor(() => outcome.length === 1, 'the frozen attempt answered');
  return { h, other, outcome, meanwhile: seen!.value };
}

describe('C12: a job failed (and removed) by the stalled check while its executor still runs', () => {
  it.each([
    ['kept', 'sends', SENT, false, false],
    ['removed (removeOnFail)', 'sends', SENT, false, true],
    ['removed (removeOnFail)', 'answers capacity', notSent('no_worker_available'), true, true],
  ] as [string, string, ExecutorResult<string>, boolean, boolean][])(
    'failed and %s: another host finds the stage in flight, and the frozen attempt that then %s is the one that counts',
    async (_k, _n, answer, deferred, removed) => {
      const { h, other, outcome, meanwhile } = await frozenPastStalledCheck(answer, removed, (o) =>
        o.engine.dispatchStage(image, {}),
      );
      expect(meanwhile).toMatchObject({ dispatched: false, reason: 'dispatch_in_flight' });
      expect(other.executor.callsFor(image)).toBe(0);
      // the frozen attempt's answer stands: a capacity answer is a deferral with its wake-up
      expect(outcome).toEqual([deferred ? 'deferred' : 'dispatched']);
      expect(await h.engine.isStageDeferred(image)).toBe(deferred);
      expect(await h.engine.listDeferred()).toHaveLength(deferred ? 1 : 0);
    },
    40_000,
  );

  it('failed and removed (removeOnFail): a producer’s enqueue meanwhile adds nothing (dispatch_in_flight), and the frozen attempt’s capacity answer defers the stage', async () => {
    const { h, other, outcome, meanwhile } = await frozenPastStalledCheck(
      notSent('no_worker_available'),
      true,
      async (o) => ({
        enqueued: await o.engine.enqueue(image, {}),
        // what the queue holds right after the enqueue, while the frozen attempt still runs
        queued: await o.engine.queue.getJobCounts('wait', 'prioritized', 'delayed', 'active'),
      }),
    );
    expect(meanwhile).toEqual({
      enqueued: { added: false, reason: 'dispatch_in_flight', payloadTaken: false },
      queued: { wait: 0, prioritized: 0, delayed: 0, active: 0 },
    });
    // not lost: the stage is deferred, its wake-up waits, and a producer finds it so
    expect(outcome).toEqual(['deferred']);
    const [deferral] = await h.engine.listDeferred();
    expect(await h.engine.queue.getJobState(deferral!.wakeUpJobId)).toBe('delayed');
    expect(await h.engine.queue.getJobCounts('wait', 'prioritized', 'delayed', 'active')).toEqual({
      wait: 0,
      prioritized: 0,
      delayed: 1,
      active: 0,
    });
    expect(await other.engine.enqueue(image, {})).toMatchObject({ added: false, reason: 'deferred' });
    expect([h.executor.callsFor(image), other.executor.callsFor(image)]).toEqual([1, 0]);
  }, 40_000);
});
