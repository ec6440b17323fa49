import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C2: processor: the context a job dispatches with', () => {
  it('a job never dispatches with force (only a direct call may ask for it)', async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the job completed');
    expect(h.executor.calls.map((c) => c.force)).toEqual([false]);
  });
});
