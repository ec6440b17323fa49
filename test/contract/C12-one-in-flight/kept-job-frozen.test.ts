import { Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { handedOn } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Path: a job kept once completed (added by hand, BullMQ's default
 * `removeOnComplete: false`) runs on a worker that freezes (a GC pause) while its executor
 * runs, past BullMQ's job lock but not past the engine's `lockMs`. BullMQ's stalled check
 * hands the job on (stc 0 -> 1). The frozen worker wakes, its executor answers `dispatched`:
 * the release finds the job handed on and marks it superseded (`handedOn`: sds = 1), so the
 * redelivery must send nothing. README (FAQ): "A job BullMQ redelivers after a stall waits
 * (delayed, no attempt spent) while the stalled attempt's lock lives. Only a process frozen
 * past `lockMs` that then resumes can overlap another attempt"; operator table: a redelivery
 * "sends nothing when the stage went out meanwhile".
 * What happens: the processor of the woken worker then calls `store.markFinished(id)` for the
 * kept job (src/bullmq/processor.ts, the default branch), with no check that this worker still
 * holds the job: FINISHED marks sdf = atm, sdt = stc (already 1), sdp. The redelivery's begin
 * sees sdf with a stalled count that did not grow since (stc 1 = sdt 1): `retried` (taken for
 * an operator's retry by hand), which overrides `sds`: the stage is sent a second time.
 * R26_CONTROL=1 keeps the same job but with removeOnComplete: true (no mark): sent once.
 */
const image: StageRef = { scope: ['book-26', 'ch-1', 'sc-1'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C12: a kept job whose worker froze past its job lock', () => {
  it('a stage is sent once when a worker running a kept (removeOnComplete: false) job freezes past its BullMQ job lock and wakes to finish', async () => {
    const h = harness();
    const redis = client();
    const jobId = 'r26-kept-frozen';
    const jobKey = `${h.prefix}:${h.queueName}:${jobId}`;
    // run 1: the worker freezes inside the executor until BullMQ handed the job on, then sends
    h.executor.script(image, async () => {
      await handedOn(redis, jobKey);
      return SENT;
    });
    await h.engine.queue.add('image', data, {
      jobId,
      attempts: 3,
      removeOnComplete: process.env.R26_CONTROL ? true : false,
      removeOnFail: false,
    });
    const results: { dispatched?: boolean; reason?: string | null }[] = [];
    const worker = new Worker(
      h.queueName,
      async (j: Job, token?: string) => {
        const out = await h.engine.processor(j, token);
        results.push(out as never);
        return out;
      },
      { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix, stalledInterval: 300 },
    );
    worker.on('error', () => undefined);
    h.engine.attachWorker(worker);
    try {
      await waitFor(() => results.length >= 2, 'the redelivery ran', 20_000);
      expect(results[0]!.dispatched).toBe(true);
      // the frozen run sent the stage; its redelivery must not send it again
      expect(results[1]!.dispatched).toBe(false);
      expect(h.executor.callsFor(image)).toBe(1);
    } finally {
      await worker.close();
    }
  }, 40_000);
});
