import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { holdPromotion, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * A clear of an idempotent deferral, and of a capacity deferral whose promoted run then fails
 * for real (retries left, BullMQ backoff), each run while the clear is under way (its promotion
 * held): one clear counted, and the next deferral is the first of a fresh chain.
 */
const a: StageRef = { scope: ['r45-self', 'ch-1'], stage: 'image' };

it.each([
  ['idempotent, re-deferred idempotent', [notSent('already_completed')], /@idem\.0\.1\.0\./],
  [
    'capacity, a real failure then re-deferred',
    [new Error('downstream 503'), notSent('no_worker_available')],
    /@cap\.1\.0\.1\./,
  ],
])(
  'C10: %s after a clear: the clear counts 1 and the chain is fresh',
  async (_what, after, shape) => {
    const h = harness({
      windows: { capacitySeconds: 300, idempotentSeconds: 300, jitter: 0 },
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } },
    });
    const first = (after[after.length - 1] as { reason: string }).reason;
    h.executor.script(a, notSent(first), ...after);
    expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: first });
    const [d] = await h.engine.listDeferred(a.scope);
    const wakeUp = d!.wakeUpJobId;
    const { go, restore } = holdPromotion(h.engine.queue, wakeUp);
    const worker = h.engine.createWorker();
    watch(worker);
    try {
      const clearing = h.engine.clearDeferrals(['r45-self']);
      await waitFor(
        async () => (await h.engine.listDeferred(a.scope)).some((s) => s.wakeUpJobId !== wakeUp),
        'the promoted wake-up to run and defer again',
        15_000,
      );
      go.open();
      expect(await clearing).toBe(1);
      const [now] = await h.engine.listDeferred(a.scope);
      expect(now).toMatchObject({ deferrals: 1 });
      expect(now!.wakeUpJobId).toMatch(shape);
    } finally {
      restore();
      await worker.close();
    }
  },
  30_000,
);
