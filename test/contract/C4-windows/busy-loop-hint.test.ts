import { harness, notSent } from '../../helpers/engine';
import type { StageRef } from '../../../src';

/**
 * Path: the engine keeps "Redis' clock minus this host's" from every batch reply
 * (src/deferral-store.ts:100, `clockOffsetMs = redisMs - Date.now()`, read when the
 * reply's callback runs) and a deferral's window end is `store.redisNow() + windowMs`
 * (src/dispatch.ts:529-530); the DEFER script then sets the marker to expire at that
 * end by Redis' own clock (`PX until - nowMs()`, src/lua/scripts.ts:535), and the
 * wake-up is due at the same instant. When the reply of the begin's batch waits in the
 * socket while the process is busy (a CPU-bound turn of the event loop: a big JSON
 * parse, a GC pause, another attempt's synchronous work; here 2 s), Date.now() in the
 * callback is late by that long, the offset is too small by it, and every window the
 * engine records next is SHORTER by the same amount: the marker and the wake-up end
 * ~2 s before the downstream's `retryAfterMs`.
 *
 * Expected (README, semantics table): "the executor answers capacity with
 * `retryAfterMs` | the window is the hint, clamped to [50 ms, `capacityMaxSeconds`],
 * lengthened (never shortened) by up to `jitter` ... the stage never asks before the
 * hint." What happens: a 5 s hint gives a ~3 s window (the stage is dispatchable and
 * its wake-up due ~2 s before the hint).
 */
const ref: StageRef = { scope: ['book-27', 'busy'], stage: 'image' };

describe('C4: a busy worker process', () => {
  it("a downstream's retryAfterMs is not shortened by as long as the process was busy when a batch reply came in", async () => {
    const h = harness({ windows: { capacitySeconds: 30, capacityMaxSeconds: 60, jitter: 0 } });
    await h.engine.waitUntilReady();
    h.executor.script(ref, notSent('no_worker_available', { retryAfterMs: 5000 }));
    const p = h.engine.dispatchStage(ref, {});
    // the begin's batch goes out on the next check phase (setImmediate); right after it is
    // written, the process is busy for 2 s (Redis answers meanwhile; the reply waits)
    setImmediate(() => {
      const end = Date.now() + 2000;
      while (Date.now() < end) {
        /* busy */
      }
    });
    const r = await p;
    expect(r).toMatchObject({ dispatched: false, reason: 'no_worker_available', retryable: true });
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(ref));
    // the hint (5 s) from the executor's answer, never shortened (a few ms of round trips aside)
    expect(pttl).toBeGreaterThan(4800);
  }, 20_000);
});
