import { expectUnwritten, harness, SENT, snapshot } from '../../helpers/engine';
import { keysUnder, waitFor } from '../../helpers/redis';

const scene = ['book-1', 'ch-2', 'sc-7'];
const image = { scope: scene, stage: 'image' };

describe('C12: in flight and success', () => {
  it('a second dispatch while one is in flight returns dispatch_in_flight with no side effect', async () => {
    const h = harness();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    h.executor.script(image, async () => {
      await gate;
      return SENT;
    });
    const first = h.engine.dispatchStage(image, {});
    await waitFor(() => h.executor.calls.length === 1, 'first executor call');
    const before = await snapshot(h.redis, h.prefix);
    const second = await h.engine.dispatchStage(image, {});
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect(second).toEqual({ dispatched: false, reason: 'dispatch_in_flight', retryable: true });
    expect(h.executor.calls).toHaveLength(1);
    release();
    expect((await first).dispatched).toBe(true);
    const third = await h.engine.dispatchStage(image, {});
    expect(third.dispatched).toBe(true);
    expect(h.executor.calls).toHaveLength(2);
  });

  it('a successful dispatch leaves nothing of the stage in Redis', async () => {
    const h = harness();
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ dispatched: true, reason: null, retryable: false });
    const keys = await keysUnder(h.redis, h.prefix);
    // the queue's fencing counter is the queue's, not the stage's
    expect(keys.filter((k) => k.includes('sd:') && !k.endsWith(':sd:fence'))).toEqual([]);
  });
});
