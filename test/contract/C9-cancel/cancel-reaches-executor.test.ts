import { type StageRef } from '../../../src';
import { harness, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { blocking } from '../../helpers/attempts';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C9: a cancel reaches the running executor', () => {
  it('on the same engine: the signal aborts at once and the result says cancelled', async () => {
    const run = blocking(SENT);
    const h = harness({ executor: run.fn });
    const result = h.engine.dispatchStage(image, {});
    const ctx = await run.started;
    await h.engine.cancelActiveDispatch(image);
    expect(ctx.signal.aborted).toBe(true);
    expect(await result).toMatchObject({ dispatched: true, cancelled: true });
  });

  it('from another engine: the signal aborts within one lock renewal', async () => {
    const run = blocking(SENT);
    const a = harness({ lockMs: 1000, executor: run.fn });
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const result = a.engine.dispatchStage(image, {});
    const ctx = await run.started;
    await b.engine.cancelActiveDispatch(image);
    await waitFor(() => ctx.signal.aborted, 'the signal aborted');
    expect(await result).toMatchObject({ dispatched: true, cancelled: true });
  });
});
