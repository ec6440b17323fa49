import { noCapacity, type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';

/**
 * A resource's line wakes the oldest chain first: a stage whose chain ended (a cancel) and that
 * defers again starts a fresh chain, which waits behind chains begun before it.
 */
const a: StageRef = { scope: ['book-l', 'sc-a'], stage: 'image' };
const b: StageRef = { scope: ['book-l', 'sc-b'], stage: 'image' };

describe('C31: a fresh chain queues behind older ones in its resource’s line', () => {
  it('C31: a stage cancelled and deferred again is woken after a stage whose chain began in between', async () => {
    const h = harness({ windows: { capacitySeconds: 30, jitter: 0 } });
    h.executor.fallback = noCapacity({ resource: 'gpu' });
    await h.engine.dispatchStage(a, {});
    // b names no resource of its own: it reads no gate, and its answer puts it in gpu's line
    await h.engine.dispatchStage(b, {});
    await h.engine.cancelStage(a);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    await h.engine.dispatchStage(a, {});
    expect(h.executor.callsFor(a)).toBe(2);
    expect(await h.engine.isStageDeferred(a)).toBe(true);
    const woken: StageRef[] = [];
    h.engine.on('woken', (e) => woken.push(e.ref));
    await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 });
    expect(woken).toEqual([b]);
    expect(await h.engine.isStageDeferred(a)).toBe(true);
  });
});
