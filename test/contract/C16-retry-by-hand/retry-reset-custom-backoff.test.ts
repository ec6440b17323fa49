import { Worker } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * The same cause as retry-all-reset-unattached.test.ts, without `attempts: 1`. Jobs of a
 * custom backoff type (added by the user, docs' "a job added by hand"; the Worker has a
 * `backoffStrategy`) are retried by the engine itself (processor.ts:293-296: `countRetried` +
 * `later`, a DelayedError: BullMQ's `atm` is not counted), so a job that fails for good after
 * 3 attempts is marked `sdf` = 0 (markFinished, scripts.ts:194), `sdt` = 0. On a Worker of one's
 * own without `attachWorker`, `sdt` stays after BullMQ's failure; an operator's retry with
 * `resetAttemptsMade` deletes `atm` (read 0 = `sdf`). The first retried job's chain end
 * (supersedeRecords, scripts.ts:457) does not take the second (waiting) for retried by hand
 * (`atm` = `sdf`, `sdt` present), nor supersedes it (not handed on, not active); `begin`
 * (scripts.ts:340) takes it for retried by hand (`sdf` and not redelivered) and it sends again.
 * Expected (README operator table): "Two failed jobs of one stage retried together (Retry all)
 * dispatch it once: the first to run sends it, the other completes as `superseded`", retries
 * "with or without `resetAttemptsMade`". What happens: the stage is sent twice.
 */
const image: StageRef = { scope: ['book-30', 'ch-2', 'sc-1'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C16: Retry with resetAttemptsMade of two failed custom-backoff jobs of one stage', () => {
  it('a stage is sent once (it was sent twice) when an operator retries (resetAttemptsMade) two failed jobs of one stage with a custom backoff type on a Worker without attachWorker', async () => {
    const h = harness();
    const e = () => new Error('downstream 500');
    h.executor.script(image, e(), e(), e(), e(), e(), e(), SENT, SENT);
    const worker = new Worker(h.queueName, h.engine.processor, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      concurrency: 1,
      settings: { backoffStrategy: () => 20 },
    });
    try {
      const { failed, done } = watch(worker);
      const opts = { attempts: 3, backoff: { type: 'mine' } as never };
      await h.engine.queue.add('image', data, { ...opts, jobId: 'r30-a' });
      await waitFor(() => failed.length === 1, 'the first job failed for good', 10_000);
      await h.engine.queue.add('image', data, { ...opts, jobId: 'r30-b' });
      await waitFor(() => failed.length === 2, 'the second job failed for good', 10_000);
      const jobs = await h.engine.queue.getFailed();
      expect(jobs).toHaveLength(2);
      for (const job of jobs) await job.retry('failed', { resetAttemptsMade: true });
      await waitFor(() => done.length === 2, 'both retried jobs ran', 15_000);
      const sent = h.executor.callsOf(image).filter((c) => c.result?.dispatched).length;
      expect(sent).toBe(1);
    } finally {
      await worker.close();
    }
  }, 40_000);
});
