import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { holdPromotion, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/** Two clears of one scope at once, the second overwriting the first's marks. */
const a: StageRef = { scope: ['r43-overlap', 'ch-1'], stage: 'image' };

it('C10: two overlapping clears, the promoted run deferring again before either CLEAR: counted once in total, a fresh chain', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  h.executor.script(a, notSent('no_worker_available'), notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
  const [d] = await h.engine.listDeferred(a.scope);
  const wakeUp = d!.wakeUpJobId;
  const { go, restore } = holdPromotion(h.engine.queue, wakeUp);
  // each clear promotes the wake-up once it marked it: two promotions begun, both clears marked
  type Backend = { promote(id: string): Promise<void> };
  const backend = (h.engine.queue as unknown as { getBackend(): Backend }).getBackend();
  const held = backend.promote.bind(backend);
  let promotions = 0;
  backend.promote = (id: string) => {
    if (id === wakeUp) promotions++;
    return held(id);
  };
  const worker = h.engine.createWorker({ autorun: false });
  const { done } = watch(worker);
  try {
    const first = h.engine.clearDeferrals(['r43-overlap']);
    const second = h.engine.clearDeferrals(['r43-overlap', 'ch-1']);
    await waitFor(() => promotions === 2, 'both clears to mark and promote');
    void worker.run();
    await waitFor(() => done.some((c) => c.id === wakeUp), 'the promoted wake-up to run and defer again');
    go.open();
    const [x, y] = await Promise.all([first, second]);
    expect(x + y).toBe(1);
    const [after] = await h.engine.listDeferred(a.scope);
    expect(after).toMatchObject({ deferrals: 1 });
  } finally {
    backend.promote = held;
    restore();
    await worker.close();
  }
});
