import { inSandbox, SANDBOXES } from '../../helpers/sandbox';
import { waitFor } from '../../helpers/redis';

/**
 * A cancel of a stage whose executor runs in a sandboxed processor (README, "Sandboxed
 * processors"): it reaches the child's `ctx.signal` as it reaches another host's, at the next
 * renewal of the stage's lock (the fixture's lockMs is 1 s).
 */
const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe.each(SANDBOXES)('C9: a cancel from the parent of a sandboxed processor in %s', (_, useWorkerThreads) => {
  it("C9: aborts the running executor's signal in the sandbox; the job completes cancelled and leaves no deferral", () =>
    inSandbox(useWorkerThreads, async (s) => {
      await s.h.engine.enqueue(image, { mode: 'hang' });
      await waitFor(async () => (await s.calls()).length === 1, 'the executor to start', 20_000);
      expect(await s.h.engine.cancelStage(image)).toMatchObject({ inFlight: true });
      await waitFor(() => s.done.length === 1, 'the job completed', 20_000);
      expect(await s.calls()).toEqual(['image:hang', 'image:aborted']);
      expect(s.done[0]!.result).toMatchObject({ cancelled: true });
      expect(await s.h.engine.isStageDeferred(image)).toBe(false);
    }));
});
