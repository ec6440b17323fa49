import { DelayedError, Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { handedOn } from '../../helpers/jobs';
import type { StageRef } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';

/**
 * RetriedSince (src/lua/scripts.ts, FINISHED / FAIL with ARGV '1'): a Worker
 * listener's mark that finds the job unfinished (`finishedOn` gone: retried by hand since)
 * HDELs `sdt` unconditionally. But that `sdt` may no longer be the mark of the finish the
 * listener reports: the retried run may already have run and been marked by the processor
 * (sdf, sdt, '<member>?'), its worker then dying before BullMQ failed it. The listener's request
 * is fire-and-forget on another host's connection (two hosts; latency), so it can land that late.
 * With `sdt` gone, the crash redelivery of the retried run is taken for a retry by hand
 * (`retried`), which overrides `sds`: the stage that went out meanwhile (a chain end marked the
 * still-active job superseded) is sent a second time. README: "its redelivery runs once more on
 * its old budget (and sends nothing when the stage went out meanwhile)".
 * The late listener request is stood in for by its effect (HDEL sdt on a job with no finishedOn,
 * exactly what retriedSince does). Set R25_CONTROL=1 to skip it: the redelivery is superseded.
 */
const image: StageRef = { scope: ['book-25', 'ch-1', 'sc-1'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe("C16: a late Worker listener's mark drops the next run's stalled-count mark", () => {
  it("a stage is sent once when a late listener mark (retriedSince) of an earlier run lands on a retried run that failed for good and whose worker died before BullMQ failed it (it dropped that run's stalled count: sent twice)", async () => {
    const h = harness();
    h.executor.script(image, SENT, new Error('downstream 500'), SENT, SENT);
    const redis = client();
    const job = await h.engine.queue.add('image', data, {
      jobId: 'r25-kept-1',
      attempts: 1,
      removeOnComplete: false,
      removeOnFail: false,
    });
    const jobKey = `${h.prefix}:${h.queueName}:${job.id}`;
    let runs = 0;
    const results: unknown[] = [];
    let direct: unknown;
    let first: number | undefined;
    const worker = new Worker(
      h.queueName,
      async (j: Job, token?: string) => {
        if (j.id !== job.id) return h.engine.processor(j, token);
        runs += 1;
        if (runs === 2) {
          // the retried run fails for good: the processor marks it (sdf, sdt, '<member>?')
          await h.engine.processor(j, token).catch(() => undefined);
          // the first finish's listener request lands only now (another host, behind latency)
          // (the engine's own mark request, as its 'completed' listener sends it for run 1)
          if (!process.env.R25_CONTROL)
            await new DeferralStore(h.engine.queue).markFinished(job.id!, { processedOn: first });
          // meanwhile the stage goes out by another path (a host's direct call): the chain ends
          direct = await h.engine.dispatchStage(image, {});
          // ... and this worker dies before BullMQ failed the job: the stalled check hands it on
          await handedOn(redis, jobKey);
          throw new DelayedError();
        }
        const out = await h.engine.processor(j, token);
        results.push(out);
        return out;
      },
      { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix, stalledInterval: 300 },
    );
    worker.on('error', () => undefined);
    worker.on('completed', (j: Job) => {
      if (j.id === job.id && runs === 1) first = j.processedOn;
      if (j.id === job.id && runs === 1) void j.retry('completed', { resetAttemptsMade: true }).catch(() => undefined);
    });
    h.engine.attachWorker(worker);
    try {
      await waitFor(() => runs >= 3 && results.length >= 2, 'the redelivery ran', 20_000);
      expect((direct as { dispatched?: boolean }).dispatched).toBe(true);
      const redelivery = results[1] as { dispatched?: boolean; reason?: string | null };
      // sent by run 1, failed in run 2, sent by the direct call: the redelivery must send nothing
      expect(redelivery.dispatched).toBe(false);
      expect(h.executor.callsFor(image)).toBe(3);
    } finally {
      await worker.close();
    }
  }, 40_000);
});
