import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * C16: Retry all on two jobs of one stage sends it once. With `removeOnComplete: false` Bull Board's
 * Completed tab holds every dispatched job of the stage, and its "Retry all" re-runs them together
 * (`queue.retryJobs({ state: 'completed' })`).
 */
describe('C16: Retry all on two kept completed jobs of one stage', () => {
  it('C16: sends the stage once', async () => {
    const h = harness({ removeOnComplete: false });
    const worker = h.engine.createWorker({ concurrency: 1 });
    const { done } = watch(worker);
    for (let n = 1; n <= 2; n++) {
      expect((await h.engine.enqueue(image, { n })).added).toBe(true);
      await waitFor(() => done.length === n || null, `dispatch ${n}`);
    }
    expect(h.executor.calls).toHaveLength(2);

    await h.engine.queue.retryJobs({ state: 'completed' });
    await waitFor(() => done.length === 4 || null, 'both retried jobs ran');
    expect(done.slice(2).map((d) => d.result.dispatched)).toEqual([true, false]);
    expect(h.executor.calls).toHaveLength(3);
  });
});
