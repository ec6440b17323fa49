import { inSandbox, SANDBOXES } from '../../helpers/sandbox';
import { waitFor } from '../../helpers/redis';

/**
 * A sandboxed processor whose child process (or worker thread) dies mid-dispatch (README,
 * "Sandboxed processors"): BullMQ fails that attempt ("Unexpected exit code"); the retry finds
 * the dead attempt's stage lock until it lapses (lockMs, 1 s here), then sends the stage once.
 */
const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe.each(SANDBOXES)(
  'C14: a sandboxed processor in %s that dies while its executor runs',
  (_, useWorkerThreads) => {
    it('C14: loses nothing: the job spends one attempt, and its retry sends the stage once', () =>
      inSandbox(useWorkerThreads, async (s) => {
        const { jobId } = await s.h.engine.enqueue(image, { mode: 'crash' });
        await waitFor(() => s.done.length === 1, 'the job completed', 20_000);
        expect(s.failed.map((f) => [f.id, f.attemptsMade])).toEqual([[jobId, 1]]);
        expect(s.failed[0]!.error.message).toMatch(/exit/i);
        expect(s.done[0]).toMatchObject({ id: jobId, result: { dispatched: true } });
        expect(await s.calls()).toEqual(['image:crash', 'image:crash']);
      }));
  },
);
