import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { addProducerJob } from '../../helpers/producer-job';
import type { StageRef } from '../../../src';

/**
 * A producer's job (`<sid>@r.…`, added without the probe) that begins while the stage's wake-up
 * holds its licence (the window ended, the wake-up waits for a worker) does not run beside it:
 * it completes as `superseded`, spending nothing of the budget, and the wake-up dispatches the
 * stage on its chain.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C11: a producer job that begins while a wake-up holds the stage', () => {
  it('completes as superseded without calling the executor nor spending an attempt; the wake-up dispatches the stage', async () => {
    const h = harness({
      windows: { capacitySeconds: 0.3, jitter: 0 },
      retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } },
    });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, {});
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the window ended', 3000);
    // lifo: it runs before the wake-up
    const r = await addProducerJob(h.engine.queue, image, { attempts: 1, lifo: true });
    const worker = h.engine.createWorker({ concurrency: 1 });
    const { done, failed } = watch(worker);
    await waitFor(() => done.length === 2, 'both jobs completed', 5000);
    expect(done[0]).toMatchObject({ id: r.id, result: { dispatched: false, reason: 'superseded' } });
    expect(done[1]!.result).toMatchObject({ dispatched: true });
    expect({ failed: failed.length, calls: h.executor.calls.length }).toEqual({ failed: 0, calls: 2 });
  });
});
