import type { ExecutorResult } from '../../../src';
import { stageId } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { type harness, notSent, SENT } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { recording, untilAborted } from '../../helpers/attempts';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

describe('C5: what dispatchStage answers, field by field (run N)', () => {
  /** Deletes the stage's lock while its executor runs (as a failover that lost it would). */
  const dropLock = (h: ReturnType<typeof harness>) =>
    h.redis.del(new DeferralStore(h.engine.queue).keys.lock(stageId(image)));

  /** A dispatch whose lock is deleted while its executor waits, which then answers `answer`. */
  async function answerAfterLockDrop(answer: ExecutorResult<string>) {
    const gate = latch<void>();
    const { h, ctxOf } = recording(async () => {
      await gate.opened;
      return answer;
    });
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await dropLock(h);
    gate.open();
    return { h, result };
  }

  it('a sent stage: exactly dispatched, no reason, not retryable, the executor result, nothing else', async () => {
    const { h } = recording(async () => SENT);
    const times: number[] = [];
    h.engine.on('dispatched', (e) => times.push(e.executorMs));
    const t0 = performance.now();
    const r = await h.engine.dispatchStage(image, {});
    const took = performance.now() - t0;
    expect(r).toEqual({
      dispatched: true,
      reason: null,
      retryable: false,
      result: SENT,
    });
    // the executor's own time: never negative, within the call's
    expect(times[0]).toBeGreaterThanOrEqual(0);
    expect(times[0]).toBeLessThanOrEqual(took);
  });

  it("an executor that throws: the call rethrows it, the failed event says 'executor_error' with its time, no hookFailed", async () => {
    const { h } = recording(async () => {
      throw new Error('boom');
    });
    const failed: { reason: string; executorMs: number }[] = [];
    const hooks: unknown[] = [];
    h.engine.on('failed', (e) => failed.push(e));
    h.engine.on('hookFailed', (e) => hooks.push(e));
    const t0 = performance.now();
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('boom');
    const took = performance.now() - t0;
    expect(failed.map((f) => f.reason)).toEqual(['executor_error']);
    expect(failed[0]!.executorMs).toBeGreaterThanOrEqual(0);
    expect(failed[0]!.executorMs).toBeLessThanOrEqual(took);
    expect(hooks).toEqual([]);
  });

  it('a rollback that throws: the call rethrows it, with a hookFailed event for the rollback', async () => {
    const { h } = recording(async () => notSent('send_failed', { retryable: false }), {
      rollback: async () => {
        throw new Error('rollback broke');
      },
    });
    const hooks: { hook: string }[] = [];
    h.engine.on('hookFailed', (e) => hooks.push(e));
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('rollback broke');
    expect(hooks.map((e) => e.hook)).toEqual(['rollback']);
  });

  it('an outcome that is not deferrable and says nothing of retrying is retryable', async () => {
    const { h } = recording(async () => notSent('send_failed'));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'send_failed', retryable: true });
  });

  it('a lock lost while the executor runs, then a capacity answer: lock lost, retryable, nothing deferred', async () => {
    const { h, result } = await answerAfterLockDrop(notSent('no_worker_available'));
    expect(await result).toMatchObject({ dispatched: false, reason: 'dispatch_lock_lost', retryable: true });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('a lock lost while the executor runs, then a send: dispatched, flagged lockLost', async () => {
    const { result } = await answerAfterLockDrop(SENT);
    expect(await result).toEqual({ dispatched: true, reason: null, retryable: false, result: SENT, lockLost: true });
  });

  it("an executor that answers the reason 'rollback_error' itself: no hookFailed (no hook failed)", async () => {
    const { h } = recording(async () => notSent('rollback_error'));
    const hooks: unknown[] = [];
    h.engine.on('hookFailed', (e) => hooks.push(e));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ reason: 'rollback_error' });
    expect(hooks).toEqual([]);
  });

  it('a lock the renewal finds lost, then a capacity answer: lock lost, retryable, nothing deferred', async () => {
    const { h, ctxOf } = recording(
      async (_ref, ctx) => {
        await untilAborted(ctx).catch(() => undefined);
        return notSent('no_worker_available');
      },
      { lockMs: 1000 },
    );
    const result = h.engine.dispatchStage(image, {});
    await waitFor(() => ctxOf(image) !== undefined, 'the executor to start');
    await dropLock(h);
    expect(await result).toMatchObject({ dispatched: false, reason: 'dispatch_lock_lost', retryable: true });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('a lock lost unseen, then an answer that is not deferrable: the release finds it lost', async () => {
    const { result } = await answerAfterLockDrop(notSent('send_failed', { retryable: false }));
    expect(await result).toMatchObject({ dispatched: false, reason: 'dispatch_lock_lost', retryable: true });
  });
});
