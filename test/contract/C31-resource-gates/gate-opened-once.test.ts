import { noCapacity, type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';

/** `gateOpened` says a gate that was closed opened: only the wake that opened it reports it. */
const stage = (n: number): StageRef => ({ scope: ['book-o', `sc-${n}`], stage: 'image' });

it('C31: gateOpened comes from the wake that opened a closed gate only, not from a wake of an open gate nor a plain wakeDeferred', async () => {
  const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 60, jitter: 0 } });
  const opened: unknown[] = [];
  h.engine.on('gateOpened', (e) => opened.push(e));
  h.executor.script(stage(0), noCapacity());
  for (let i = 0; i <= 3; i++) await h.engine.dispatchStage(stage(i), {});
  // a plain wake reads no line and opens no gate
  expect((await h.engine.wakeDeferred({ limit: 10 })).woken).toEqual([]);
  expect(opened).toEqual([]);
  expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 })).woken).toEqual([stage(0)]);
  expect(opened).toEqual([{ resource: 'gpu', woken: 1 }]);
  // the gate is open now: waking more of its line opens nothing
  expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 2 })).woken).toEqual([stage(1), stage(2)]);
  expect(opened).toEqual([{ resource: 'gpu', woken: 1 }]);
});
