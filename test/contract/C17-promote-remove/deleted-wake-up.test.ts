import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { sleep, watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Bull Board's "Delete" on a delayed wake-up (`job.remove()`)
 * removes the job, not the marker nor the licence (docs/ecosystem.md says so,
 * and says the stage stays deferred until the window ends). What the other
 * operator paths then do with that stage:
 * - `wakeDeferred` (the capacity signal: "a slot freed") picks it, deletes its
 *   marker, fails to promote the missing job (the failure is swallowed) and
 *   reports it woken: the signal is spent on a stage nothing will dispatch,
 *   while another stage, really waiting, is not woken. docs/design.md: "If a
 *   promotion fails, the wake-up still runs at its old time: nothing is lost".
 * - `clearDeferrals` ends it (passing check below).
 */
const a: StageRef = { scope: ['book-1', 'ch-1'], stage: 'image' };
const b: StageRef = { scope: ['book-1', 'ch-2'], stage: 'image' };

async function deferredWithDeletedWakeUp() {
  const h = harness({ windows: { capacitySeconds: 30, jitter: 0 } });
  h.executor.script(a, notSent('no_worker_available'));
  h.executor.script(b, notSent('no_worker_available'));
  await h.engine.dispatchStage(a, {}); // a waits longest
  await sleep(5);
  await h.engine.dispatchStage(b, {});
  const [da] = await h.engine.listDeferred(a.scope);
  await (await h.engine.queue.getJob(da!.wakeUpJobId))!.remove(); // Bull Board: Delete
  return h;
}

describe('C17: a wake-up deleted in Bull Board', () => {
  it('wakeDeferred({ limit: 1 }) wakes a stage that can still run, not one whose wake-up is gone', async () => {
    const h = await deferredWithDeletedWakeUp();
    const { done } = watch(h.engine.createWorker());
    const { woken } = await h.engine.wakeDeferred({ limit: 1, stage: 'image' });
    // whatever it picked must be dispatched now; a woken stage nothing dispatches is a lost signal
    await waitFor(() => done.length >= 1, 'the woken stage dispatched', 3000).catch(() => undefined);
    expect({ woken, dispatched: done.length }).toEqual({ woken: [b], dispatched: 1 });
  });

  it('PASSING CHECK: clearDeferrals ends that deferral too (BullMQ answers "not in the delayed state" for a missing job), and enqueue then adds a job', async () => {
    const h = await deferredWithDeletedWakeUp();
    expect(await h.engine.clearDeferrals(['book-1'])).toBe(2);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    // nothing dispatches a now (its wake-up is gone) until the scheduler enqueues it
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: true });
  });

  it('an enqueue inside the window of a removed wake-up adds a job at once, and the stage is dispatched once', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(a, notSent('no_worker_available'));
    await h.engine.dispatchStage(a, {});
    const [da] = await h.engine.listDeferred();
    await (await h.engine.queue.getJob(da!.wakeUpJobId))!.remove();
    // nothing would run the stage before the window's end: the deferral defers nothing
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: true });
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'dispatched');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(a)).toBe(2);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
  });
});
