import type { StageRef } from '../../src';
import { harness, notSent, SENT } from '../helpers/engine';
import { fast } from '../helpers/jobs';
import { waitFor } from '../helpers/redis';

/**
 * Review 16a: `ExecutorResult.retryAfterMs` is documented as "Ignored for other outcomes"
 * (src/types.ts) and the brief's contract says a hint on a dispatched/idempotent outcome
 * is ignored. checkExecutorResult (src/dispatch.ts) validates it on EVERY answer, before
 * looking at `dispatched`: an executor that has already sent the stage downstream and
 * passes along a header it could not parse (`Number(undefined)` = NaN) gets its success
 * turned into `executor_error`, a real failure, and BullMQ retries the job: the stage is
 * sent again on every attempt.
 */
const ref: StageRef = { scope: ['book-1', 'ch'], stage: 'image' };

describe('review16a: an unusable retryAfterMs on an outcome that ignores it', () => {
  it('review16a DEFECT (doubled dispatch): dispatched: true with retryAfterMs NaN is a failure; BullMQ retries it and the stage is SENT 3 times', async () => {
    const h = harness({ retry: { attempts: 3, backoff: fast } });
    h.executor.fallback = { ...SENT, retryAfterMs: Number.NaN };
    const queued = await h.engine.enqueue(ref, {});
    expect(queued.added).toBe(true);
    const worker = h.engine.createWorker();
    const finished: string[] = [];
    worker.on('completed', () => finished.push('completed'));
    worker.on('failed', (job) => {
      if (job?.finishedOn) finished.push('failed');
    });
    await waitFor(() => finished.length > 0, 'the job to finish');
    // every call below answered dispatched: true: the downstream got the stage that many times
    const sent = h.executor.calls.filter((c) => c.result?.dispatched === true).length;
    expect({ sent, finished }).toEqual({ sent: 1, finished: ['completed'] });
    await worker.close();
  });

  it('review16a DEFECT: a direct dispatchStage that SENT the stage rejects with INVALID_EXECUTOR_RESULT (the caller cannot know it was sent)', async () => {
    const h = harness();
    h.executor.script(ref, { ...SENT, retryAfterMs: -1 });
    await expect(h.engine.dispatchStage(ref, {})).resolves.toMatchObject({ dispatched: true });
  });

  it('review16a DEFECT: already_completed with retryAfterMs -1 spends an attempt instead of deferring (idempotent)', async () => {
    const h = harness();
    h.executor.script(ref, notSent('already_completed', { retryAfterMs: -1 }));
    const r = await h.engine.dispatchStage(ref, {}).catch((e: { code?: string }) => ({ error: e.code }));
    expect(r).toMatchObject({ reason: 'already_completed' });
    expect(await h.engine.isStageDeferred(ref)).toBe(true);
  });
});
