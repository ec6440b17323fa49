import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { latch, watch } from '../../helpers/jobs';
import { keptFor, probe } from '../../helpers/visible';
import { DeferralStore } from '../../../src/deferral-store';
import { stageId, type StageRef } from '../../../src';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * C27: nothing is kept for a stage that is not deferred, in flight, waiting out a retry or failed
 * for good. A wake-up whose worker froze past `lockMs` (its lock lapsed: deleted here, as PX
 * expiry does) still sends the stage and completes; with `removeOnComplete: false` it is kept in
 * the Completed tab. The stage then runs again and is sent: it is idle, nothing failed.
 */
describe('C27: a kept wake-up that completed after its lock lapsed', () => {
  it('C27: leaves nothing of its stage behind once the stage is sent again', async () => {
    const frozen = latch();
    const h = harness({ removeOnComplete: false, lockMs: 1000, windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(
      image,
      notSent('no_worker_available'),
      async () => {
        await frozen.opened; // a GC pause: ignores its signal
        return SENT;
      },
      SENT,
    );
    const lock = new DeferralStore(h.engine.queue).keys.lock(stageId(image));
    const { done } = watch(h.engine.createWorker({ concurrency: 1 }));
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    await waitFor(() => h.executor.calls.length === 2 || null, 'the wake-up runs');
    await waitFor(async () => (await h.redis.exists(lock)) === 1 || null, 'its lock');
    await h.redis.del(lock); // lapsed while frozen
    frozen.open();
    await waitFor(() => done.length === 2 || null, 'the wake-up completed');
    expect(done[1]!.result).toMatchObject({ dispatched: true, lockLost: true });

    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    await waitFor(() => done.length === 3 || null, 'the stage sent again');
    expect(done[2]!.result).toMatchObject({ dispatched: true });
    expect(await probe(h, image)).toEqual({ kind: 'none' });
    expect(await keptFor(h, image)).toEqual([]);
  });
});
