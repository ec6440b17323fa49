import { harness } from './helpers/engine';
import { waitFor } from './helpers/redis';

/**
 * Behaviours of src/engine.ts that mutants of it survived (docs/testing.md,
 * "Surviving mutants"): each test fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-1'], stage: 'image' };

describe('14.2: createWorker', () => {
  it('14.2: `autorun: false` is kept: the worker fetches nothing until the host calls run()', async () => {
    const h = harness();
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker({ autorun: false });
    // the engine is ready (what an autorun worker waits for), and every callback queued on it has run
    await h.engine.waitUntilReady();
    await new Promise((resolve) => setImmediate(resolve));
    expect(worker.isRunning()).toBe(false);
    expect(h.executor.calls).toHaveLength(0);
    void worker.run();
    await waitFor(() => h.executor.calls.length === 1, 'the job, once the host runs the worker');
  });
});
