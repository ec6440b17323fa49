import { harness } from '../../helpers/engine';
import { fast, sleep, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * a fix hands BullMQ's manual rate limit back untouched: no
 * attempt, no `failed` event, no failure record, the release `plain` (src/dispatch.ts
 * `isRateLimit`, processor `case 'rate_limited'`). The engine tells it by the message
 * 'bullmq:rateLimitExceeded' OR by `error.name === 'RateLimitError'`; BullMQ 6.7 tells it by the
 * message only (worker.js handleFailed: `err.message === RATE_LIMIT_ERROR`). An executor error
 * that merely is NAMED RateLimitError (an HTTP SDK's 429 error class, a host's own) is, for BullMQ,
 * a real failure: it spends an attempt and, on the last one, fails the job for good; the engine
 * meanwhile reported nothing (no `failed` event, no `executor_error`), took no licence for the
 * retry and skipped its own budget rules (failsForGood, the engine's retry of a job retried by
 * hand, the UnrecoverableError wrap).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C5: an executor error named RateLimitError that is not BullMQ's", () => {
  it("a 429 error class named RateLimitError (not BullMQ's) is a real failure: the engine emits `failed`", async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    const engineFailed: string[] = [];
    h.engine.on('failed', (e) => engineFailed.push(e.reason));
    class RateLimitError extends Error {
      override name = 'RateLimitError';
    }
    h.executor.script(image, new RateLimitError('429 Too Many Requests from the render farm'));
    const { jobId } = await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length >= 1, 'BullMQ failed the job', 8000);
    await sleep(100);
    expect({
      state: await h.engine.queue.getJobState(jobId!),
      engineFailed,
    }).toEqual({ state: 'failed', engineFailed: ['executor_error'] });
  });
});
