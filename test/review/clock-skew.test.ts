import { harness, notSent, teardown, SENT } from '../helpers/engine';
import { waitFor } from '../helpers/redis';
import type { StageRef } from '../../src';
import { watch } from './util';

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

describe('review: a worker host whose clock is 4 s ahead of Redis', () => {
  it('does not dispatch a wake-up inside its 6 s window', async () => {
    const real = Date.now.bind(Date);
    const h = harness({ windows: { capacitySeconds: 6, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    let until = 0;
    h.engine.on('deferred', (e) => (until = e.until));
    await h.engine.dispatchStage(image, {}); // deferred on a host with the right clock
    expect(until).toBeGreaterThan(0);
    // the worker host: 4 s ahead
    jest.spyOn(Date, 'now').mockImplementation(() => real() + 4000);
    let calledAt = 0;
    h.engine.on('dispatched', () => (calledAt = real()));
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the wake-up ran', 12_000);
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    // Redis and this machine share a clock: `real()` is Redis' time
    expect(calledAt).toBeGreaterThanOrEqual(until);
  });
});
