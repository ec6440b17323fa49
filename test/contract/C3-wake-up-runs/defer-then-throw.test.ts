import { type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import { waitFor } from '../../helpers/redis';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C3: a producer's job that defers, then throws, does not dispatch twice", () => {
  it('its retry finds it was superseded by its own deferral and stops', async () => {
    let thrown = false;
    const h = harness({
      windows: { capacitySeconds: 0.05, jitter: 0 },
      faultHook: (point) => {
        if (point === 'deferral-recorded' && !thrown) {
          thrown = true;
          throw new Error('lost the reply after the deferral was written');
        }
      },
    });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await addProducerJob(h.engine.queue, image, { attempts: 3, backoff: { type: 'fixed', delay: 300 } });
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 2, 'the wake-up and the retried job completed');
    expect(done.map((d) => d.result.reason ?? null).sort()).toEqual(['superseded', null].sort());
    expect(h.executor.calls).toHaveLength(2);
  });
});
