import { teardown } from '../../helpers/engine';
import { deferredOnce, runWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * Contract: no stage is dispatched inside its deferral window. A worker whose
 * clock runs ahead of Redis' promotes the wake-up early (BullMQ promotes
 * delayed jobs by the worker's Date.now()). Within maxClockSkewMs the wake-up
 * waits the rest out; beyond it, begin takes the early start for an
 * operator's Promote and dispatches inside the window.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C4: a worker host whose clock is 4 s ahead of Redis', () => {
  it('does not dispatch a wake-up inside its 6 s window', async () => {
    const real = Date.now.bind(Date);
    const { h, until } = await deferredOnce(image, 6); // deferred on a host with the right clock
    expect(until).toBeGreaterThan(0);
    // the worker host: 4 s ahead
    jest.spyOn(Date, 'now').mockImplementation(() => real() + 4000);
    const { result, calledAt } = await runWakeUp(h, real);
    expect(result).toMatchObject({ dispatched: true });
    // Redis and this machine share a clock: `real()` is Redis' time
    expect(calledAt).toBeGreaterThanOrEqual(until);
  });
});
