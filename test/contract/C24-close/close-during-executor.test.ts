import { notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { recording, untilAborted } from '../../helpers/attempts';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

describe('C24: a job-driven send, and a close during the executor (run N)', () => {
  it("a job's send completes it with the exact answer", async () => {
    const { h } = recording(async () => SENT);
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the job completed');
    expect(done[0]!.result).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT });
  });

  it("a job's attempt cancelled while its executor runs, which then sends anyway: its answer says cancelled", async () => {
    const { h, ctxOf } = recording(async (_ref, ctx) => {
      await untilAborted(ctx).catch(() => undefined);
      return SENT;
    });
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await h.engine.cancelActiveDispatch(image);
    await waitFor(() => done.length === 1, 'the job completed');
    expect(done[0]!.result).toMatchObject({ dispatched: true, cancelled: true });
  });

  it('close() during the executor, then a capacity answer: interrupted, nothing deferred', async () => {
    const { h, ctxOf } = recording(async (_ref, ctx) => {
      await untilAborted(ctx).catch(() => undefined);
      return notSent('no_worker_available');
    });
    const marker = h.engine.deferredStageKey(image);
    const failed: unknown[] = [];
    h.engine.on('failed', (e) => failed.push(e));
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await h.engine.close();
    expect(await result).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
    expect(await h.redis.exists(marker)).toBe(0);
    // interrupted, not failed: no failed event
    expect(failed).toEqual([]);
  });
});
