import { stageId, type StageRef } from '../../../src';
import { DeferralStore } from '../../../src/deferral-store';
import { expectUnwritten, harness, snapshot } from '../../helpers/engine';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C22: a payload that cannot be serialised is refused before anything is called or written', () => {
  it.each([
    ['a BigInt', { n: 10n }],
    [
      'a cycle',
      (() => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      })(),
    ],
  ])('%s: INVALID_PAYLOAD from dispatchStage and enqueue, no lock left', async (_what, payload) => {
    const h = harness();
    await h.engine.isStageDeferred(image);
    const before = await snapshot(h.redis, h.prefix);
    await expect(h.engine.dispatchStage(image, payload)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD' });
    await expect(h.engine.enqueue(image, payload)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD' });
    expect(h.executor.calls).toHaveLength(0);
    expect(h.rollbacks).toHaveLength(0);
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
  });

  it('an exception after the lock was taken releases it', async () => {
    const h = harness({
      journal: undefined,
      faultHook: (point) => {
        if (point === 'executor-answered') throw new Error('boom');
      },
    });
    await expect(h.engine.dispatchStage(image, {})).rejects.toThrow('boom');
    expect(await h.redis.exists(new DeferralStore(h.engine.queue).keys.lock(stageId(image)))).toBe(0);
  });
});

describe('C22: a sparse scope array is an INVALID_STAGE_REF up front', () => {
  it('dispatchStage, enqueue and cancel refuse [, "a"]', async () => {
    const h = harness();
    // eslint-disable-next-line no-sparse-arrays
    const sparse = { scope: [, 'a'] as unknown as string[], stage: 'image' };
    await expect(h.engine.dispatchStage(sparse, {})).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.enqueue(sparse, {})).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.cancelActiveDispatch(sparse)).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    expect(h.executor.calls).toHaveLength(0);
  });
});
