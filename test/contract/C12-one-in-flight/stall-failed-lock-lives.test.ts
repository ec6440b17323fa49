import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { DispatchResult, StageRef } from '../../../src';

/**
 * Path: a worker freezes (a GC pause) while its executor runs, past BullMQ's job lock
 * but well within the engine's `lockMs` (60 s here); BullMQ's stalled check, finding the
 * job's lock gone with `maxStalledCount` spent (0 here; the default 1 on a job's second stall),
 * fails the job for good ("job stalled more than allowable limit"). The frozen executor is
 * still running and will send the stage when the process wakes.
 * README (FAQ "Can two workers dispatch the same stage at once?"): "No: a per-stage lock ...
 * A job BullMQ redelivers after a stall waits ... while the stalled attempt's lock lives. Only a
 * process frozen past `lockMs` that then resumes can overlap another attempt"; scripts.ts
 * (liveLock): "A worker that stalled lost BullMQ's lock but maybe not its executor: the lock
 * lives out its own TTL (lockMs)"; docs/design.md ("The stage lock"): "A worker that stalls
 * (frozen past BullMQ's `lockDuration` ...) loses BullMQ's lock but keeps the stage ... (issue
 * 10.6: no attempt starts while another's lock is live, whatever the Worker's lockDuration)".
 * What happens: the stage lock is tied to the job and `liveLock` (src/lua/scripts.ts, HELPERS)
 * counts it dead as soon as the job's hash has `finishedOn` — which BullMQ's stalled check
 * writes when it fails the job, while the stalled executor still runs. A dispatch from another
 * host then takes the stage's lock and sends it; the frozen worker wakes and sends it too:
 * two executors of one stage overlap although nothing was frozen past `lockMs`. (BullMQ 6 fails
 * such a job when a worker next fetches it, `defa`: here the same Worker's second slot.)
 */
const image: StageRef = { scope: ['book-26', 'ch-2', 'sc-1'], stage: 'image' };

describe('C12: a job failed by the stalled check while its executor still runs', () => {
  it('a stage is sent once when BullMQ fails a stalled job (maxStalledCount) whose frozen worker still runs its executor, within lockMs', async () => {
    const h = harness({ lockMs: 60_000 });
    const other = harness({ lockMs: 60_000 }, { prefix: h.prefix, queueName: h.queueName });
    const redis = client();
    let direct: DispatchResult | undefined;
    const { jobId } = await h.engine.enqueue(image, {});
    const jobKey = `${h.prefix}:${h.queueName}:${jobId}`;
    h.executor.script(image, async () => {
      // frozen: BullMQ's lock of the job lapses, and its stalled check fails the job for good
      await redis.del(`${jobKey}:lock`);
      await waitFor(async () => !!(await redis.hget(jobKey, 'finishedOn')), 'failed by the stalled check', 10_000);
      // meanwhile another host dispatches the stage (a scheduler's tick), a second or so later
      direct = await other.engine.dispatchStage(image, {});
      // the frozen worker wakes, well within lockMs, and its executor sends the stage
      return SENT;
    });
    const worker = h.engine.createWorker({ stalledInterval: 300, maxStalledCount: 0, concurrency: 2 });
    // (the frozen worker's own completion then fails: BullMQ no longer lets it finish the job)
    worker.on('error', () => undefined);
    const { failed } = watch(worker);
    await waitFor(() => h.executor.callsFor(image) === 1 && direct !== undefined, 'the direct call answered', 20_000);
    await waitFor(() => failed.length === 1, 'BullMQ failed the job');
    // the stalled attempt's lock lives (lockMs 60 s): the other host must find it in flight
    expect(direct).toMatchObject({ dispatched: false, reason: 'dispatch_in_flight' });
    expect(other.executor.callsFor(image)).toBe(0);
  }, 40_000);
});
