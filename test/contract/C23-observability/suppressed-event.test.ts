import { CapacityError } from '../../../src';
import { harness, notSent } from '../../helpers/engine';

const scene = ['book-31', 'ch-4'];
const hinted = { scope: scene, stage: 'image' };
const done = { scope: scene, stage: 'video' };

/**
 * A suppressed dispatch reads its deferral's end from the wake-up's id (the begin answers the
 * marker alone, no TTL): the answer and the `suppressed` event say the `until` the deferral
 * recorded, to the ms, on Redis' clock, whichever host asks, and the reason of its class.
 */
describe('C23: a suppressed dispatch reports its deferral', () => {
  it("its event and its answer carry the deferral's reason and until, to the ms, also asked from a host whose clock is 4 s behind", async () => {
    const a = harness({ windows: { capacitySeconds: 30, idempotentSeconds: 120, jitter: 0.2 } });
    a.executor.script(hinted, new CapacityError({ retryAfterMs: 7_000 }));
    a.executor.script(done, notSent('already_completed'));
    const deferrals = [await a.engine.dispatchStage(hinted, {}), await a.engine.dispatchStage(done, {})];
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() - 4000);
    try {
      // another engine of the queue, started on the skewed clock (it measures its own offset)
      const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
      await b.engine.waitUntilReady();
      const events: { reason: string; until: number; via: string }[] = [];
      b.engine.on('suppressed', (e) => events.push(e));
      const answers = [await b.engine.dispatchStage(hinted, {}), await b.engine.dispatchStage(done, {})];
      const untils = deferrals.map((d) => d.until!);
      expect(answers.map((r) => [r.reason, r.deferred, r.until])).toEqual([
        ['deferred_capacity', true, untils[0]],
        ['deferred_idempotent', true, untils[1]],
      ]);
      expect(events.map((e) => [e.reason, e.until, e.via])).toEqual([
        ['deferred_capacity', untils[0], 'dispatch'],
        ['deferred_idempotent', untils[1], 'dispatch'],
      ]);
      expect(b.executor.calls).toHaveLength(0);
    } finally {
      spy.mockRestore();
    }
  });
});
