import { CapacityError, noCapacity, type StageRef } from '../../../src';
import { harness, type Harness } from '../../helpers/engine';
import { redisNow } from '../../helpers/observe';

/**
 * A capacity answer may name the resource of a stage whose engine has no `resourceOf` for it: the
 * answer closes that gate for its own window, and the stage waits that window, as any capacity deferral.
 */
const stage: StageRef = { scope: ['book-n', 'sc-1'], stage: 'image' };
const gateKey = (h: Harness) => `${h.prefix}:${h.queueName}:sd:gate:gpu`;

describe('C31: a capacity answer naming a resource the stage was not known to need', () => {
  it('closes the gate for the answer’s window, and the stage waits that window', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 }, inFlightRetryMs: 100 });
    h.executor.script(stage, noCapacity({ resource: 'gpu' }));
    const r = await h.engine.dispatchStage(stage, {});
    const now = await redisNow(h.redis);
    expect(r).toMatchObject({ dispatched: false, reason: 'no_capacity' });
    // the window is the capacity window (60 s), not the short one of an attempt a wake overtook
    const gateUntil = Number(await h.redis.get(gateKey(h)));
    expect({ stageWaits: r.until! - now > 50_000, gateClosed: gateUntil - now > 50_000 }).toEqual({
      stageWaits: true,
      gateClosed: true,
    });
  });

  it('a thrown CapacityError naming a resource closes that gate, and the stage waits in its line', async () => {
    const h = harness();
    const closed: unknown[] = [];
    h.engine.on('gateClosed', (e) => closed.push(e));
    h.executor.script(stage, new CapacityError({ resource: 'gpu' }));
    expect(await h.engine.dispatchStage(stage, {})).toMatchObject({ dispatched: false, reason: 'no_capacity' });
    expect(closed).toEqual([expect.objectContaining({ resource: 'gpu', ref: stage })]);
    expect((await h.engine.listDeferred(['book-n'])).map((d) => d.resource)).toEqual(['gpu']);
  });
});

describe('C31: a capacity answer naming another resource than the stage’s resourceOf', () => {
  it.each([
    ['gpu (the stage’s resourceOf)', 'gpu'],
    ['tpu (the answer’s)', 'tpu'],
  ])(
    'closes that gate for the answer’s window, a line wake of %s long before the attempt notwithstanding',
    async (_what, woken) => {
      const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 60, jitter: 0 }, inFlightRetryMs: 100 });
      // a wake long before: it counts for attempts in flight then, not for this one
      await h.engine.wakeDeferred({ resource: woken });
      h.executor.script(stage, noCapacity({ resource: 'tpu' }));
      const r = await h.engine.dispatchStage(stage, {});
      const now = await redisNow(h.redis);
      expect(r).toMatchObject({ dispatched: false, reason: 'no_capacity' });
      const tpuUntil = Number(await h.redis.get(`${h.prefix}:${h.queueName}:sd:gate:tpu`));
      expect({ stageWaits: r.until! - now > 50_000, gateClosed: tpuUntil - now > 50_000 }).toEqual({
        stageWaits: true,
        gateClosed: true,
      });
    },
  );
});
