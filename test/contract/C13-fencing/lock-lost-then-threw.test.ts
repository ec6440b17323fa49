import { stageId } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { recording } from '../../helpers/attempts';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

describe('C13: a job whose lock was lost while the executor ran, and that then threw', () => {
  it('tries again without spending an attempt (another attempt may have held the stage): then dispatches', async () => {
    let lost = false;
    const { h, seen } = recording(
      async () => {
        if (lost) return SENT;
        lost = true;
        const store = new DeferralStore(h.engine.queue);
        await h.redis.del(store.keys.lock(stageId(image)));
        throw new Error('the executor failed');
      },
      { retry: { attempts: 1, backoff: fast }, inFlightRetryMs: 20 },
    );
    await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length + failed.length > 0, 'the job settled');
    expect(failed).toHaveLength(0);
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(seen).toHaveLength(2);
  });
});

describe('C13: a direct call whose lock was lost while the executor ran, and that then threw', () => {
  it('rejects with what the executor threw and records no failure (no failed event): another attempt may have held the stage', async () => {
    let lost = false;
    const { h } = recording(async () => {
      if (lost) return SENT;
      lost = true;
      const store = new DeferralStore(h.engine.queue);
      await h.redis.del(store.keys.lock(stageId(image)));
      throw new Error('the executor failed');
    });
    const failed: unknown[] = [];
    h.engine.on('failed', (e) => failed.push(e));
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('the executor failed');
    expect(failed).toEqual([]);
    // nothing held the stage: the next call runs it
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
  });
});
