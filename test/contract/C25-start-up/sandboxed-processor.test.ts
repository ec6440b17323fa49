import { inSandbox, SANDBOXES } from '../../helpers/sandbox';
import { waitFor } from '../../helpers/redis';

/**
 * A sandboxed processor (README, "Sandboxed processors"): the child's engine runs the attempt,
 * the parent's producer-only engine attaches the Worker.
 */
const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe.each(SANDBOXES)('C25: a sandboxed processor in %s', (_, useWorkerThreads) => {
  it('C25: dispatches a stage: the executor runs once in the sandbox and the job completes with its result', () =>
    inSandbox(useWorkerThreads, async (s) => {
      await s.h.engine.enqueue(image, { mode: 'send' });
      await waitFor(() => s.done.length === 1, 'the job completed', 20_000);
      expect(s.done[0]!.result).toMatchObject({ dispatched: true });
      expect(await s.calls()).toEqual(['image:send']);
    }));
});
