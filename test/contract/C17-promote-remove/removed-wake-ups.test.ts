import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { ClearIncompleteError, type StageRef } from '../../../src';

/**
 * BullMQ's bulk operations remove delayed jobs, and with them the engine's wake-ups, but not the
 * engine's own keys (marker, licence, wait index): `queue.drain(true)`, `queue.clean(0, n,
 * 'delayed')`, `queue.obliterate()`. The README's operator table now says so for each.
 */
const a: StageRef = { scope: ['book-1', 'ch-1'], stage: 'image' };
const b: StageRef = { scope: ['book-1', 'ch-2'], stage: 'image' };

async function deferBoth(h: ReturnType<typeof harness>) {
  h.executor.script(a, notSent('no_worker_available'));
  h.executor.script(b, notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
  await new Promise((r) => setTimeout(r, 5)); // a's chain starts first: a is the longest-waiting
  expect(await h.engine.dispatchStage(b, {})).toMatchObject({ reason: 'no_worker_available' });
}

describe('C17: wake-ups removed by BullMQ bulk operations', () => {
  it('after one wake-up was removed (Bull Board Delete, queue.remove, clean delayed), wakeDeferred({ limit: 1 }) skips that stage and wakes the live deferred one, which dispatches', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    await deferBoth(h);
    const [wa] = await h.engine.listDeferred([...a.scope]);
    await h.engine.queue.remove(wa!.wakeUpJobId); // one wake-up gone (Bull Board Delete / clean / drain)
    const { done } = watch(h.engine.createWorker());
    const { woken } = await h.engine.wakeDeferred({ stage: 'image', limit: 1 }); // a render slot freed
    // "Their wake-ups run now, once": the woken stage is dispatched
    await waitFor(() => done.length >= 1, 'a woken stage dispatched', 3000).catch(() => undefined);
    expect({ woken, dispatched: done.map((d) => d.result.dispatched) }).toEqual({ woken: [b], dispatched: [true] });
  });

  it('after queue.drain(true), clearDeferrals ends both deferrals (no ClearIncompleteError), twice in a row', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    await deferBoth(h);
    await h.engine.queue.drain(true);
    const first = await h.engine.clearDeferrals(['book-1']).catch((e: unknown) => e);
    const second = await h.engine.clearDeferrals(['book-1']).catch((e: unknown) => e);
    expect(first).not.toBeInstanceOf(ClearIncompleteError);
    expect(first).toBe(2);
    expect(second).toBe(0);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
  });

  it('documented (README, "an operator … deletes a wake-up"): after queue.drain(true) the next enqueue adds a job at once (a marker whose wake-up is gone defers nothing)', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    await deferBoth(h);
    await h.engine.queue.drain(true);
    expect(await h.engine.queue.getDelayedCount()).toBe(0);
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: true });
  });

  it('documented (guide): after queue.obliterate() the engine keys left defer nothing without their wake-ups: not deferred, not listed, and enqueue adds again', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    await deferBoth(h);
    await h.engine.queue.pause();
    await h.engine.queue.obliterate({ force: true });
    await h.engine.queue.resume();
    // their wake-ups are gone: the markers left defer nothing (they lapse with their windows)
    expect([await h.engine.isStageDeferred(a), await h.engine.isStageDeferred(b)]).toEqual([false, false]);
    expect(await h.engine.listDeferred()).toEqual([]);
    expect(await h.engine.enqueue(a, {})).toMatchObject({ added: true });
  });
});
void SENT;
