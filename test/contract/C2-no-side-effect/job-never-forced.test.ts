import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { recording } from '../../helpers/attempts';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const text = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'text' };

describe('C2: processor: the context a job dispatches with', () => {
  it('a job never dispatches with force (only a direct call may ask for it)', async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the job completed');
    expect(h.executor.calls.map((c) => c.force)).toEqual([false]);
  });
});

describe('C2: the context a direct call dispatches with', () => {
  it('ctx.force is false unless the direct call asked for it', async () => {
    const { h, seen } = recording(async () => SENT);
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(text, {}, { force: true });
    expect(seen.map((s) => s.ctx.force)).toEqual([false, true]);
  });
});
