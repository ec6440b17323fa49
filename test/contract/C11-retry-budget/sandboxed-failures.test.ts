import { inSandbox, SANDBOXES } from '../../helpers/sandbox';
import { waitFor } from '../../helpers/redis';

/**
 * A real failure in a sandboxed processor (README, "Sandboxed processors"): the engine's errors
 * cross to the parent by name (BullMQ's `UnrecoverableError` test reads the name). The fixture's
 * engine allows 2 attempts.
 */
const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe.each(SANDBOXES)('C11: a sandboxed processor in %s whose executor throws', (_, useWorkerThreads) => {
  it('C11: spends the 2 attempts, then fails the job for good; the stage is free for a new job', () =>
    inSandbox(useWorkerThreads, async (s) => {
      const { jobId } = await s.h.engine.enqueue(image, { mode: 'fail' });
      await waitFor(() => s.failed.length === 2, 'two failures', 20_000);
      expect(s.failed.map((f) => [f.error.name, f.error.message, f.attemptsMade])).toEqual([
        ['Error', 'boom 1', 1],
        ['UnrecoverableError', 'boom 2', 2],
      ]);
      expect(await s.h.engine.queue.getJobState(jobId!)).toBe('failed');
      expect(await s.calls()).toEqual(['image:fail', 'image:fail']);
      expect(await s.h.engine.enqueue(image, { mode: 'send' })).toMatchObject({ added: true });
      await waitFor(() => s.done.length === 1, 'the new job completed', 20_000);
      expect(s.done[0]!.result).toMatchObject({ dispatched: true });
    }));
});
