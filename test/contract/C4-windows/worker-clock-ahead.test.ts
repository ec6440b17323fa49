import { teardown } from '../../helpers/engine';
import { deferredOnce, runWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * Contract: no stage is dispatched inside its deferral window. A worker whose
 * clock runs ahead of Redis' promotes the wake-up early (BullMQ promotes
 * delayed jobs by the worker's Date.now()). Within maxClockSkewMs (default
 * 1 s) the wake-up waits the rest out; beyond it, begin takes the early start
 * for an operator's Promote (and the host is reported: clock-skew.test.ts).
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C4: a worker host whose clock is 0.8 s ahead of Redis (within maxClockSkewMs)', () => {
  it('does not dispatch a wake-up inside its 3 s window', async () => {
    const real = Date.now.bind(Date);
    const { h, until } = await deferredOnce(image, 3); // deferred on a host with the right clock
    expect(until).toBeGreaterThan(0);
    // the worker host: 0.8 s ahead
    jest.spyOn(Date, 'now').mockImplementation(() => real() + 800);
    const { result, calledAt } = await runWakeUp(h, real);
    expect(result).toMatchObject({ dispatched: true });
    // Redis and this machine share a clock: `real()` is Redis' time
    expect(calledAt).toBeGreaterThanOrEqual(until);
  });
});
