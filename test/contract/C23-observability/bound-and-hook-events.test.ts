import { type StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C23: bounds and hook failures emit events', () => {
  it('maxCapacityDeferrals: a limit event with outcome failed', async () => {
    const h = harness({ limits: { maxCapacityDeferrals: 1 } });
    const limits: unknown[] = [];
    h.engine.on('limit', (e) => limits.push(e));
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(image, {});
    await h.redis.del(h.engine.deferredStageKey(image));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ limitReached: true });
    expect(limits).toEqual([
      { ref: image, class: 'capacity', reason: 'no_worker_available', deferrals: 1, outcome: 'failed' },
    ]);
  });

  it('maxIdempotentDeferrals: a limit event with outcome completed', async () => {
    const h = harness({ limits: { maxIdempotentDeferrals: 1 } });
    const limits: unknown[] = [];
    h.engine.on('limit', (e) => limits.push(e));
    h.executor.fallback = notSent('already_completed');
    await h.engine.dispatchStage(image, {});
    await h.redis.del(h.engine.deferredStageKey(image));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ completed: true });
    expect(limits).toEqual([
      { ref: image, class: 'idempotent', reason: 'already_completed', deferrals: 1, outcome: 'completed' },
    ]);
  });

  it('a throwing rollback: hookFailed and failed events', async () => {
    const h = harness({ rollback: async () => Promise.reject(new Error('rollback down')) });
    const seen: string[] = [];
    h.engine.on('hookFailed', (e) => seen.push(`hook:${e.hook}`));
    h.engine.on('failed', (e) => seen.push(`failed:${e.reason}`));
    h.executor.script(image, notSent('no_worker_available'));
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('rollback down');
    expect(seen).toEqual(['hook:rollback', 'failed:rollback_error']);
  });
});
