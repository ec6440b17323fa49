import { Worker } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Path: the chain-end rule, `supersedeRecords` (src/lua/scripts.ts:439-465), against
 * `begin`'s retry-by-hand rule (scripts.ts:336-343). begin takes a job for retried by hand when
 * `(sdf and sdf ~= atm) or ((sdf or failedMe) and not redelivered)`, redelivered being
 * `sdt and stc > sdt`: with `sdt` present and `stc == sdt` (no stall) it is retried by hand.
 * supersedeRecords (scripts.ts:457) takes a record's job for retried only when
 * `sdf and (atm ~= sdf or not sdt)`, and otherwise supersedes it only when handed on
 * (`stc > sdt`) or in BullMQ's active list (scripts.ts:461). The two disagree on a job with
 * `sdf == atm` and `sdt == stc`, waiting: begin runs it fresh, the chain end leaves it alone.
 * Such a job: it failed for good on its first attempt (the processor's mark, markFinished
 * scripts.ts:194, records `sdf` = BullMQ's `atm` before moveToFinished counts the failure: 0, and
 * `sdt` = its stalled count, 0), on a Worker of one's own that runs `engine.processor` without
 * `attachWorker` (so no listener drops `sdt` after BullMQ's failure), and an operator retries it
 * with `resetAttemptsMade` (BullMQ's retryJob deletes `atm`: read as 0 = `sdf`).
 * Expected (README operator table: "retries a failed job (Bull Board's Retry, job.retry('failed'),
 * with or without `resetAttemptsMade`) ... Two failed jobs of one stage retried together (Retry
 * all) dispatch it once: the first to run sends it, the other completes as `superseded`"; the
 * README asks for attachWorker only so that a retried run that *stalls before it begins* is told
 * from a redelivery). What happens: the first retried job sends the stage, its chain end does
 * not supersede the second (waiting, `atm` = `sdf`, `sdt` kept), and the second begins as a retry
 * by hand and sends the stage again: one "Retry all" (with resetAttemptsMade), the stage sent twice.
 */
const image: StageRef = { scope: ['book-30', 'ch-1', 'sc-1'], stage: 'image' };

describe("C16: Retry all with resetAttemptsMade on a Worker of one's own", () => {
  it('a stage is sent once (it was sent twice) when an operator retries (resetAttemptsMade) two failed jobs of one stage on a Worker that runs engine.processor without attachWorker', async () => {
    const h = harness({ retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(image, new Error('downstream 500'), new Error('downstream 500'), SENT, SENT);
    // a Worker of one's own, concurrency 1 (the second retried job waits while the first runs)
    const worker = new Worker(h.queueName, h.engine.processor, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      concurrency: 1,
    });
    try {
      const { failed, done } = watch(worker);
      const first = await h.engine.enqueue(image, {});
      expect(first.added).toBe(true);
      await waitFor(() => failed.length === 1, 'the first job failed for good');
      const second = await h.engine.enqueue(image, {});
      expect(second.added).toBe(true);
      await waitFor(() => failed.length === 2, 'the second job failed for good');
      // the operator retries both failed jobs, resetting their attempts (as README allows)
      const jobs = await h.engine.queue.getFailed();
      expect(jobs).toHaveLength(2);
      for (const job of jobs) await job.retry('failed', { resetAttemptsMade: true });
      await waitFor(() => done.length === 2, 'both retried jobs ran', 15_000);
      const sent = h.executor.callsOf(image).filter((c) => c.result?.dispatched).length;
      expect(sent).toBe(1);
    } finally {
      await worker.close();
    }
  }, 30_000);
});
