import { harness, notSent, teardown } from '../../helpers/engine';
import { payloadThroughWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * checkPayload walks arrays with `forEach` (which skips holes and sees no
 * extra properties) and recurses once per level (no depth bound, no guard
 * around getters). README: "Bad input (a payload that does not survive JSON
 * as it is) is rejected before anything is called or written", with a typed
 * error (`INVALID_PAYLOAD`).
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

// eslint-disable-next-line no-sparse-arrays
const sparse = [1, , 3];
const tagged = Object.assign([1, 2], { note: 'kept?' });

describe('C22: payloads the walker lets through that JSON changes', () => {
  it.each([
    ['an array with a hole', { a: sparse }],
    ['an array with a named property', { a: tagged }],
    ['-0', { n: -0 }],
  ])('%s: refused up front, or the wake-up gets the same payload as the first call', async (_what, payload) => {
    const r = await payloadThroughWakeUp(image, payload);
    if ('refused' in r) {
      expect(r.refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
      return;
    }
    expect(r.woken).toStrictEqual(r.first);
  });
});

describe('C22: payloads that make the walker itself throw', () => {
  function deep(n: number) {
    const root: Record<string, unknown> = {};
    let d = root;
    for (let i = 0; i < n; i++) d = (d.a = {}) as Record<string, unknown>;
    return root;
  }
  it.each([
    // the walker recurses once per level: a RangeError from the walker itself, not a typed refusal
    ['5 000 levels deep', () => deep(5_000)],
    ['20 000 levels deep', () => deep(20_000)],
    [
      'a getter that throws',
      () =>
        Object.defineProperty({}, 'x', {
          enumerable: true,
          get() {
            throw new Error('boom');
          },
        }),
    ],
  ])('%s: a typed error (INVALID_PAYLOAD), not a raw one', async (_what, make) => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    let thrown: unknown;
    await h.engine.dispatchStage(image, make()).catch((e: unknown) => (thrown = e));
    expect({ thrown, executorCalls: h.executor.calls.length, rollbacks: h.rollbacks.length }).toEqual({
      thrown: expect.objectContaining({ code: 'INVALID_PAYLOAD' }),
      executorCalls: 0,
      rollbacks: 0,
    });
  });
});
