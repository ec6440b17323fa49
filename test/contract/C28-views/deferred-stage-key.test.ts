import { harness, notSent } from '../../helpers/engine';

const scene = ['book-1', 'ch-2', 'sc-7'];
const image = { scope: scene, stage: 'image' };

describe('C28: the deferred-stage key', () => {
  it('is under the prefix, has the remaining window as TTL, and deleting it ends the deferral at once', async () => {
    const h = harness();
    h.executor.script(image, notSent('duplicate_pending'));
    await h.engine.dispatchStage(image, {});
    const key = h.engine.deferredStageKey(image);
    expect(key.startsWith(`${h.prefix}:`)).toBe(true);
    expect(await h.redis.exists(key)).toBe(1);
    await h.redis.del(key);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    const r = await h.engine.dispatchStage(image, {});
    expect(r.dispatched).toBe(true);
    expect(h.executor.calls).toHaveLength(2);
  });
});
