import { UnrecoverableError } from 'bullmq';
import { harness, notSent, SENT } from '../../helpers/engine';
import { ManualWorker } from '../../reliability/harness';
import { keptFor, probe } from '../../helpers/visible';
import type { StageRef } from '../../../src';

/**
 * The operations fleet (test/reliability/operations.test.ts) failed once in CI, seed
 * 443904603, with maxLicencesPerStage 2: its sampler saw a stage's licence beside a failed-job
 * record (`…@cap.1.0.0… …@r.…?`) and counted the record as a second licence. The interleaving,
 * driven here by BullMQ's manual processing (one Worker, fetch by hand, the stalled check run by
 * hand): an enqueued job's attempt fails for good (UnrecoverableError); the processor's FAIL
 * (src/lua/scripts.ts, FAIL) writes `<member>?` and marks the job (`sdf`, `sdt` = its stalled
 * count 0), then its worker freezes before BullMQ's moveToFailed (the fleet's SIGSTOP). BullMQ's
 * lock of the job lapses and the stalled check hands it on (`stc` 1). The redelivery's begin
 * (BATCH, begin) takes it for a redelivery (`stc` > `sdt`: no retry by hand), takes the stage lock
 * and leaves the record (only a wake-up takes its licence back from its record); it defers, and
 * DEFER, which revokes licences and never records (`?`), adds the wake-up's licence. The job then
 * completes and is removed: the record names no job any more.
 * design.md (Keys, `sd:licences`): "per stage: at most one licence (maybe marked `!`) and one `?`
 * record per job failed for good". The stage has one licence and one live wake-up; its record
 * can send nothing, and the chain's next end (the wake-up's success) drops it. Not a breach (the
 * sampler now counts licences only). Seen from outside: one deferral, one wake-up, one send, and
 * nothing of the stage kept once it was sent.
 */
const video: StageRef = { scope: ['book-31', 'ch-1', 'sc-1'], stage: 'video' };

describe('C14: a failed-job record beside the licence of its own redelivery', () => {
  it("a job redelivered after its failed-for-good record (its worker froze before BullMQ's failure) defers beside its record; the stage is sent once and the chain's end drops the record", async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(video, new UnrecoverableError('refused for good'), notSent('no_worker_available'), SENT);
    const { jobId } = await h.engine.enqueue(video, {});
    const base = `${h.prefix}:${h.queueName}:`;
    const m = new ManualWorker(h.queueName, h.prefix);
    try {
      const first = (await m.fetch())!;
      // the attempt's last failure: recorded, BullMQ not told (the worker froze here)
      await expect(h.engine.processor(first.job, first.token)).rejects.toThrow('refused for good');
      expect({ state: await h.engine.queue.getJobState(jobId!), probe: await probe(h, video) }).toEqual({
        state: 'active',
        probe: { kind: 'pending', jobId },
      });
      // its lock lapses; the stalled check hands the job on (two passes: mark, then move)
      await h.redis.del(`${base}${jobId}:lock`);
      await m.stalledCheck(h.redis, h.prefix, h.queueName);
      await m.stalledCheck(h.redis, h.prefix, h.queueName);
      const again = (await m.fetch())!;
      expect(again.job.id).toBe(jobId);
      const deferred = await m.run(h.engine, again.job, again.token);
      expect(deferred.result).toMatchObject({ dispatched: false, reason: 'no_worker_available' });

      // the fleet's crowded sample: the stage is deferred once, with one live wake-up (its
      // redelivered job completed and is gone), whatever the engine keeps of the failed job
      expect(await h.engine.queue.getJobState(jobId!)).toBe('unknown');
      const listed = await h.engine.listDeferred();
      expect(listed.map((d) => ({ ref: d.ref, reason: d.reason }))).toEqual([
        { ref: video, reason: 'no_worker_available' },
      ]);
      expect(await h.engine.isStageDeferred(video)).toBe(true);
      expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'active')).toEqual({
        wait: 0,
        delayed: 1,
        active: 0,
      });

      // capacity returns: the wake-up sends the stage; its chain's end drops the record
      expect((await h.engine.wakeDeferred()).woken).toEqual([video]);
      const wake = (await m.fetch())!;
      expect(wake.job.id).toBe(listed[0]!.wakeUpJobId);
      const sent = await m.run(h.engine, wake.job, wake.token);
      expect(sent.result).toMatchObject({ dispatched: true });
      expect(h.executor.calls.map((c) => c.result?.dispatched ?? 'threw')).toEqual(['threw', false, true]);
      expect(await keptFor(h, video)).toEqual([]);
      expect(await m.fetch()).toBeNull();
    } finally {
      await m.close();
    }
  }, 30_000);
});
