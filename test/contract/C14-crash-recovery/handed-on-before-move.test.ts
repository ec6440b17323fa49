import { harness, SENT } from '../../helpers/engine';
import { onCluster, waitFor } from '../../helpers/redis';
import { fetchBy, latch, sleep, watch } from '../../helpers/jobs';
import { internalMarkedSuperseded, probe } from '../../helpers/visible';
import type { StageRef } from '../../../src';

/**
 * Commit 994478d's `handedOn` rule (src/lua/scripts.ts BATCH) marks a job
 * whose success is released after BullMQ took the job from the attempt when its stalled count
 * grew, OR when it has no lock and is still in the active list (the stalled checker has not
 * moved it YET). a test walks the first branch only (the checker moved the job before
 * the release). These walk the LPOS branch: the stalled attempt's release lands while the job is
 * still active without a lock, and only then does a worker's stalled check hand it on.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

(onCluster ? describe.skip : describe)(
  'C14: a stalled attempt released before the stalled checker moved its job',
  () => {
    it.each([
      ['maxStalledCount 1: the job is handed on and ends superseded', 1],
      ['maxStalledCount 0: BullMQ sets defa and fails the job itself', 0],
    ])('%s; the stage is sent once', async (_t, maxStalledCount) => {
      const frozen = harness({ lockMs: 5000, inFlightRetryMs: 100 });
      const other = harness({ lockMs: 5000, inFlightRetryMs: 100 }, frozen);
      const started = latch();
      const resume = latch();
      frozen.executor.script(image, async () => {
        started.open();
        await resume.opened;
        return SENT;
      });
      await frozen.engine.enqueue(image, {});
      const job = await fetchBy(frozen, 'frozen-token', 300);
      const jobKey = `${frozen.prefix}:${frozen.queueName}:${job.id}`;
      const late = frozen.engine.processor(job, 'frozen-token');
      await started.opened;
      // BullMQ's lock of the job lapses (nothing renews it); the job is still in the active list
      await waitFor(async () => (await frozen.redis.exists(`${jobKey}:lock`)) === 0, 'the job lock lapsed');
      resume.open();
      expect(await late).toMatchObject({ dispatched: true });
      // the release (lazy or not) lands: the stage is no longer in flight, nor held by the job
      await waitFor(async () => (await probe(frozen, image)).kind === 'none', 'the release landed', 3000);
      // (with maxStalledCount 0 BullMQ fails the job itself, whatever the engine marked: only the
      // internal mark shows that this release saw the job handed on; kept until the core rebuild)
      expect(await internalMarkedSuperseded(frozen, job.id!)).toBe(true);
      expect(await frozen.redis.lpos(`${frozen.prefix}:${frozen.queueName}:active`, job.id!)).not.toBeNull();

      // now a worker's stalled check hands the job on
      const worker = other.engine.createWorker({ stalledInterval: 200, maxStalledCount });
      const { done, failed } = watch(worker);
      await waitFor(() => done.length + failed.length >= 1, 'the handed-on job settled', 8000);
      await sleep(200);
      expect({
        sentByStalled: frozen.executor.callsFor(image),
        sentByRedelivery: other.executor.callsFor(image),
        outcome: done.length ? (done[0]!.result as { reason: string }).reason : failed[0]!.error.message,
      }).toEqual({
        sentByStalled: 1,
        sentByRedelivery: 0,
        outcome: maxStalledCount ? 'superseded' : 'job stalled more than allowable limit',
      });
    });
  },
);
