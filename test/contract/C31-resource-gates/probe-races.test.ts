import { noCapacity, type StageRef } from '../../../src';
import { harness, SENT, type Harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const stage = (n: number): StageRef => ({ scope: ['book-r', `sc-${n}`], stage: 'image' });
const gateKey = (h: Harness) => `${h.prefix}:${h.queueName}:sd:gate:gpu`;

describe('C31: no wake-up is lost when a gate changes while an attempt is in flight', () => {
  it('a gate closed while its probe is in flight: the probe’s success still opens it and wakes the line', async () => {
    // stage 8's answers name the gate; the others need it by resourceOf
    const h = harness({
      resourceOf: (ref) => (ref.scope[1] === 'sc-8' ? undefined : 'gpu'),
      windows: { capacitySeconds: 60, jitter: 0 },
    });
    // the gate closes for 2 s (stage 1's dispatch comes within it, however slow the machine); stage 1
    // waits in its line for 60 s
    h.executor.script(stage(0), noCapacity({ retryAfterMs: 2000 }));
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    await waitFor(async () => {
      const [s] = await h.redis.time();
      return Number(await h.redis.get(gateKey(h))) <= Number(s) * 1000;
    }, 'the window to end');
    let answer!: () => void;
    h.executor.script(stage(2), () => new Promise((resolve) => (answer = () => resolve(SENT))));
    const probe = h.engine.dispatchStage(stage(2), {});
    await waitFor(() => h.executor.callsFor(stage(2)) === 1, 'the probe to run');
    // meanwhile another answer closes the gate
    h.executor.script(stage(8), noCapacity({ resource: 'gpu' }));
    await h.engine.dispatchStage(stage(8), {});
    expect(Number(await h.redis.get(gateKey(h)))).toBeGreaterThan(0);
    const woken: StageRef[] = [];
    h.engine.on('woken', (e) => woken.push(e.ref));
    answer();
    expect(await probe).toMatchObject({ dispatched: true });
    expect(await h.redis.exists(gateKey(h))).toBe(0);
    expect(woken).toEqual([stage(1), stage(8)]);
  });

  it('a gate that opens between a gated begin and its deferral: the attempt calls the executor instead', async () => {
    let once = true;
    const h: Harness = harness({
      resourceOf: () => 'gpu',
      windows: { capacitySeconds: 60, jitter: 0 },
      faultHook: async (point, ref) => {
        if (point === 'lock-taken' && ref.scope[1] === 'sc-5' && once) {
          once = false;
          await h.engine.wakeDeferred({ resource: 'gpu' });
        }
      },
    });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    const r = await h.engine.dispatchStage(stage(5), {});
    expect(r).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(stage(5))).toBe(1);
    expect(await h.engine.isStageDeferred(stage(5))).toBe(false);
    // the wake-up it added and never recorded is gone
    const jobs = await h.engine.queue.getJobs(['delayed', 'wait', 'prioritized']);
    expect(jobs.map((j) => j.id).filter((id) => id!.startsWith('book-r/sc-5/'))).toEqual([]);
  });
});

describe('C31: a wake of the line while its probe runs is not lost', () => {
  it('the probe’s capacity answer closes the gate, and defers the stage, for inFlightRetryMs only', async () => {
    const h: Harness = harness({
      resourceOf: () => 'gpu',
      windows: { capacitySeconds: 60, jitter: 0 },
      inFlightRetryMs: 200,
    });
    h.executor.script(stage(1), async () => {
      await h.engine.wakeDeferred({ resource: 'gpu' });
      return noCapacity();
    });
    const r = await h.engine.dispatchStage(stage(1), {});
    const [s, us] = await h.redis.time();
    const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
    expect(r).toMatchObject({ dispatched: false, reason: 'no_capacity' });
    const gateUntil = Number(await h.redis.get(gateKey(h)));
    expect({ stageWaits: r.until! - now <= 200, gateClosed: gateUntil - now <= 200 }).toEqual({
      stageWaits: true,
      gateClosed: true,
    });
  });
});
