import { dispatched, noCapacity, type StageRef } from '../../../src';
import { harness, LONG_WINDOWS } from '../../helpers/engine';

/**
 * The bound of one wake of a resource's line: 10,000 stages, whatever `capacityLeft` says. Its own
 * file (10,001 stages, tens of seconds): the mutation gate's quick suites leave it out.
 */
const gpu = () => 'gpu';

describe('C31: a success opens the gate and wakes the line, within capacity', () => {
  it('a `capacityLeft` past 10,000 wakes 10,000, the bound of one wake', async () => {
    // (windows of 10 min: the gate and the deferrals outlast the 10,001 dispatches, however slow the machine)
    const h = harness({ resourceOf: gpu, windows: LONG_WINDOWS });
    const big = (n: number): StageRef => ({ scope: ['book-big', `sc-${n}`], stage: 'image' });
    h.executor.script(big(0), noCapacity());
    await h.engine.dispatchStage(big(0), {});
    // 10,001 stages behind the gate; the oldest of the line (the one that closed it) woken by hand
    // opens the gate: 10,001 wait
    const waiting = Array.from({ length: 10_001 }, (_, i) => big(i + 1));
    for (let i = 0; i < waiting.length; i += 100)
      await Promise.all(waiting.slice(i, i + 100).map((ref) => h.engine.dispatchStage(ref, {})));
    expect(h.executor.calls).toHaveLength(1);
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 })).woken).toHaveLength(1);
    const woken = new Set<string>();
    h.engine.on('woken', (e) => woken.add(e.ref.scope[1]!));
    h.executor.script(big(-1), dispatched(1, { capacityLeft: 1_000_000 }));
    expect(await h.engine.dispatchStage(big(-1), {})).toMatchObject({ dispatched: true });
    expect(woken.size).toBe(10_000);
    const left = await Promise.all(waiting.map((ref) => h.engine.isStageDeferred(ref)));
    expect(left.filter(Boolean)).toHaveLength(1);
    expect(woken.has(waiting[left.indexOf(true)]!.scope[1]!)).toBe(false);
  }, 120_000);
});
