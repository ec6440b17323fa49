import { type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C13: no attempt starts while another attempt holds the stage; a fencing token orders them', () => {
  it('ctx.fencingToken strictly increases per stage across engines', async () => {
    const a = harness();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    await a.engine.dispatchStage(image, {});
    await b.engine.dispatchStage(image, {});
    await a.engine.dispatchStage(image, {});
    const [a1, a2] = a.executor.calls.map((c) => c.fencingToken);
    const [b1] = b.executor.calls.map((c) => c.fencingToken);
    expect(a1).toBeGreaterThan(0);
    expect(b1).toBeGreaterThan(a1!);
    expect(a2).toBeGreaterThan(b1!);
  });

  it('ctx.fencingToken strictly increases (as numbers and as decimal strings) across two engines dispatching at once', async () => {
    const a = harness();
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    for (let i = 0; i < 50; i++)
      await Promise.all([a.engine.dispatchStage(image, {}), b.engine.dispatchStage(image, {})]);
    const tokens = [...a.executor.calls, ...b.executor.calls].map((c) => c.fencingToken).sort((x, y) => x - y);
    for (let i = 1; i < tokens.length; i++) {
      expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!);
      expect(Number.isSafeInteger(tokens[i]!)).toBe(true);
      expect(String(tokens[i]).length).toBe(String(tokens[i - 1]).length);
    }
  });
});
