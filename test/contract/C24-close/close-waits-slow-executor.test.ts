import type { StageRef } from '../../../src';
import { harness, SENT } from '../../helpers/engine';
import { heldExecutor } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * close() waits for a running executor however long it takes (past the 2 s it gives Redis
 * work), and once the executor has answered it resolves without waiting those 2 s.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-8'], stage: 'image' };

describe('C24: close() waits for a slow executor', () => {
  it('C24: an executor that ignores its signal for 2.5 s holds close() until it answers; its send is recorded, and close() then resolves promptly', async () => {
    // it ignores its signal: a slow but well-behaved executor
    const held = heldExecutor(SENT);
    const h = harness({ executor: held.executor });
    const dispatched = h.engine.dispatchStage(image, {});
    await held.running;
    let closedAt = 0;
    const closing = h.engine.close().then(() => (closedAt = Date.now()));
    // past the 2 s close() gives an attempt's Redis work: the executor still runs, close() waits
    const t0 = Date.now();
    await waitFor(() => Date.now() - t0 > 2500, '2.5 s to pass');
    expect(closedAt).toBe(0);
    const releasedAt = Date.now();
    held.release();
    expect(await dispatched).toMatchObject({ dispatched: true, reason: null });
    await closing;
    // (a close() that lost track of its attempts starts its 2 s wait only after the release: it
    // resolves 2 s or more after it, however fast the machine)
    expect(closedAt - releasedAt).toBeLessThan(2000);
  }, 15_000);
});
