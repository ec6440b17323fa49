import { expectUnwritten, harness, notSent, snapshot } from '../../helpers/engine';

const scene = ['book-1', 'ch-2', 'sc-7'];
const image = { scope: scene, stage: 'image' };

describe('C2: while deferred, dispatchStage has no side effect at all', () => {
  it('returns deferred_capacity with until, and calls nothing and writes nothing, even with force', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'));
    const first = await h.engine.dispatchStage(image, {});
    const before = await snapshot(h.redis, h.prefix);
    for (const force of [false, true]) {
      const r = await h.engine.dispatchStage(image, {}, { force });
      expect(r).toMatchObject({ dispatched: false, reason: 'deferred_capacity', retryable: true, deferred: true });
      expect(Math.abs((r.until ?? 0) - (first.until ?? 0))).toBeLessThan(1000);
    }
    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect(h.executor.calls).toHaveLength(1);
    expect(h.rollbacks).toHaveLength(1);
    expect(h.journal).toHaveLength(1);
  });
});

describe('C2: ticks inside the window cost one executor call', () => {
  it('100 ticks -> 1 executor call, 1 journal event, 1 rollback', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    for (let i = 0; i < 100; i++) await h.engine.dispatchStage(image, {});
    expect(h.executor.calls).toHaveLength(1);
    expect(h.journal).toHaveLength(1);
    expect(h.rollbacks).toHaveLength(1);
  });
});
