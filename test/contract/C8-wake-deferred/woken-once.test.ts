import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { EngineEvents, StageRef } from '../../../src';

/**
 * A wake is reported once, by the process that woke the stage: early by the `wakeDeferred` that
 * woke it (its wake-up's run reports nothing), or plainly by a wake-up that runs at its window's
 * end or that an operator promoted.
 */
const image = (book: string): StageRef => ({ scope: [book, 'ch-1'], stage: 'image' });

/** A stage deferred for capacity (60 s), then sent; its woken events, and a worker that runs its wake-up. */
async function deferred(book: string) {
  const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
  const a = image(book);
  h.executor.script(a, notSent('no_worker_available'), SENT);
  const woken: EngineEvents['woken'][] = [];
  h.engine.on('woken', (e) => woken.push(e));
  await h.engine.dispatchStage(a, {});
  const [d] = await h.engine.listDeferred();
  const run = async () => {
    const dispatched: unknown[] = [];
    h.engine.on('dispatched', (e) => dispatched.push(e.ref));
    const worker = h.engine.createWorker();
    await waitFor(() => dispatched.length === 1, 'the wake-up to dispatch');
    await worker.close();
  };
  return { h, a, woken, wakeUpJobId: d!.wakeUpJobId, run };
}

describe('C8: one wake, one woken event', () => {
  it('a stage woken early by wakeDeferred reports woken once (early), not again when its wake-up runs', async () => {
    const { h, a, woken, wakeUpJobId, run } = await deferred('r32-woken');
    expect((await h.engine.wakeDeferred({ stage: 'image' })).woken).toEqual([a]);
    await run();
    expect(woken).toEqual([{ ref: a, jobId: wakeUpJobId, early: true }]);
  });

  it('a wake-up promoted by hand (Bull Board) reports woken once, without early', async () => {
    const { h, a, woken, wakeUpJobId, run } = await deferred('r32-promoted');
    await (await h.engine.queue.getJob(wakeUpJobId))!.promote();
    await run();
    expect(woken).toEqual([{ ref: a, jobId: wakeUpJobId }]);
  });
});
