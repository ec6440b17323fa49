import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { watch, queued } from '../../helpers/members';
import { FREE, stageView } from '../../helpers/observe';

/** Paths that held up when tried (these pass). */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C10: clears beside another clear and a wake-up in its retry backoff', () => {
  it('two clears at once: one counts the deferral, the stage is dispatched once', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    const { done } = watch(h.engine.createWorker());
    const [a, b] = await Promise.all([h.engine.clearDeferrals(['book-1']), h.engine.clearDeferrals(['book-1'])]);
    expect(a + b).toBe(1);
    await waitFor(() => done.length === 1, 'woken');
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    expect(h.executor.calls).toHaveLength(2);
    // nothing holds the stage: a dispatch now asks the executor
    expect(await stageView(h.engine, image)).toEqual(FREE);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
  });

  it('clear leaves a wake-up in its retry backoff alone (not deferred, counted 0)', async () => {
    const h = harness({
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } },
      windows: { capacitySeconds: 0.05, jitter: 0 },
    });
    h.executor.script(image, notSent('no_worker_available'), new Error('down'));
    await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'in backoff');
    expect(await h.engine.clearDeferrals(['book-1'])).toBe(0);
    expect(await h.engine.queue.getJobCounts('delayed')).toMatchObject({ delayed: 1 });
  });
});
