import { noCapacity, type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';

/** The `deferred` event names the resource a capacity deferral waits on (C31), and none when there is none. */
const stage = (n: number): StageRef => ({ scope: ['book-r', `sc-${n}`], stage: 'image' });

describe('C23: the deferred event names the resource', () => {
  it('C23: a capacity answer naming a resource emits deferred with that resource; one naming none, with none', async () => {
    const h = harness();
    const events: { ref: StageRef; reason: string; resource?: string }[] = [];
    h.engine.on('deferred', (e) => events.push(e));
    h.executor.script(stage(0), noCapacity({ resource: 'gpu' }));
    h.executor.script(stage(2), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(2), {});
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({ ref: stage(0), reason: 'no_capacity', resource: 'gpu' });
    expect(events[1]).toMatchObject({ ref: stage(2), reason: 'no_capacity' });
    expect(events[1]).not.toHaveProperty('resource');
  });

  it('C23: a stage gated behind a closed gate emits deferred (gate_closed) with the resource', async () => {
    const h = harness({ resourceOf: () => 'gpu' });
    const events: { ref: StageRef; reason: string; resource?: string }[] = [];
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    h.engine.on('deferred', (e) => events.push(e));
    await h.engine.dispatchStage(stage(1), {});
    expect(h.executor.callsFor(stage(1))).toBe(0);
    expect(events).toEqual([expect.objectContaining({ ref: stage(1), reason: 'gate_closed', resource: 'gpu' })]);
  });
});
