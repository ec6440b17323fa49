import { harness, notSent } from '../../helpers/engine';
import type { StageRef } from '../../../src';

/**
 * Path: one deferral, three `until`s. The deferral's own (dispatchStage's result, the
 * `deferred` event, the journal's `stage_deferred`) is `store.redisNow() + windowMs`
 * (src/dispatch.ts:529-530): Redis' clock. The ones a host reads back afterwards are
 * `Date.now() + PTTL` of the marker: this host's clock (a suppressed dispatch,
 * src/dispatch.ts:264; enqueue, src/bullmq/producer.ts:27; listDeferred,
 * src/store/listing.ts:83). On a host whose clock is 5 s behind Redis' (NTP not yet
 * synced on a fresh VM, a container on a drifting host), the same window ends 5 s apart
 * depending on which call the app asked: a scheduler that stores the journal's `until`
 * and compares it with its own clock re-enqueues 5 s late (or, ahead, early: every
 * enqueue then answers `deferred` and costs a probe), and a dashboard that shows both
 * shows two ends for one window.
 *
 * Expected (README API: `listDeferred` → `until`; semantics table: a suppressed call
 * returns `until`; journal `stage_deferred` has `until`): one window, one end, on one
 * clock. What happens: they differ by the host's offset from Redis (5 s here).
 */
const image: StageRef = { scope: ['book-27', 'until'], stage: 'image' };

describe("C4: a host whose clock is behind Redis' reads a deferral's end", () => {
  it('the until of a deferral (result, event, journal) and the until listDeferred, enqueue and a suppressed dispatch give for it differ by the host clock offset', async () => {
    const real = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => real() - 5000);
    try {
      const h = harness({ windows: { capacitySeconds: 30, jitter: 0 } });
      await h.engine.waitUntilReady();
      h.executor.script(image, notSent('no_worker_available'));
      const deferred = await h.engine.dispatchStage(image, {});
      const journal = (h.journal[0]!.event as { until: number }).until;
      const listed = (await h.engine.listDeferred())[0]!.until;
      const enqueued = (await h.engine.enqueue(image, {})).until!;
      const suppressed = (await h.engine.dispatchStage(image, {})).until!;
      const ends = { result: deferred.until!, journal, listed, enqueued, suppressed };
      // one window: its ends agree within a few round trips
      const spread = Math.max(...Object.values(ends)) - Math.min(...Object.values(ends));
      expect({ ends, spread: spread < 500 }).toEqual({ ends, spread: true });
    } finally {
      spy.mockRestore();
    }
  });
});
