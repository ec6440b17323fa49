import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * A clear ends the deferrals first, then promotes their wake-ups. A promotion refused (a slot
 * migrating; here a test refuses it) loses nothing: the stage is cleared and counted, and its
 * wake-up still runs at its time (here an operator's Promote), once, on a fresh chain.
 */
const a: StageRef = { scope: ['r45-refused', 'ch-1'], stage: 'image' };
const b: StageRef = { scope: ['r45-refused', 'ch-2'], stage: 'image' };
type Backend = { promote(id: string): Promise<void> };

it('C10: a wake-up whose promotion is refused is still cleared and counted, and runs at its time on a fresh chain', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  h.executor.script(a, notSent('no_worker_available'), notSent('no_worker_available'));
  h.executor.script(b, notSent('no_worker_available'));
  for (const ref of [a, b])
    expect(await h.engine.dispatchStage(ref, {})).toMatchObject({ reason: 'no_worker_available' });
  const [da] = await h.engine.listDeferred(a.scope);
  const wa = da!.wakeUpJobId;
  const backend = (h.engine.queue as unknown as { getBackend(): Backend }).getBackend();
  const real = backend.promote.bind(backend);
  backend.promote = async (id: string) => {
    if (id === wa) throw new Error('refused, as a slot migrating refuses it');
    await real(id);
  };
  try {
    expect(await h.engine.clearDeferrals(['r45-refused'])).toBe(2);
  } finally {
    backend.promote = real;
  }
  expect(await h.engine.isStageDeferred(a)).toBe(false);
  expect(await h.engine.queue.getJobState(wa)).toBe('delayed');
  const worker = h.engine.createWorker();
  const { done } = watch(worker);
  try {
    await (await h.engine.queue.getJob(wa))!.promote();
    await waitFor(() => done.some((c) => c.id === wa), "a's wake-up to run and defer again");
    expect(h.executor.callsFor(a)).toBe(2);
    const [after] = await h.engine.listDeferred(a.scope);
    expect(after).toMatchObject({ deferrals: 1 });
  } finally {
    await worker.close();
  }
});
