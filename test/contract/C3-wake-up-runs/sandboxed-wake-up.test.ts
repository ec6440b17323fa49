import { inSandbox, SANDBOXES } from '../../helpers/sandbox';
import { waitFor } from '../../helpers/redis';

/** A capacity answer in a sandboxed processor (README, "Sandboxed processors"); its window is 1 s. */
const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe.each(SANDBOXES)('C3: a stage deferred by a sandboxed processor in %s', (_, useWorkerThreads) => {
  it('C3: is deferred once (its marker, one delayed wake-up), then its wake-up runs in the sandbox after the window and sends it', () =>
    inSandbox(useWorkerThreads, async (s) => {
      await s.h.engine.enqueue(image, { mode: 'capacity' });
      await waitFor(() => s.done.length === 1, 'the first job completed', 20_000);
      expect(s.done[0]!.result).toMatchObject({ dispatched: false, reason: 'no_capacity' });
      expect(await s.h.redis.exists(s.h.engine.deferredStageKey(image))).toBe(1);
      const delayed = await s.h.engine.queue.getJobs(['delayed']);
      expect(delayed.map((j) => j.name)).toEqual(['image']);
      // while deferred, enqueueing adds nothing
      expect(await s.h.engine.enqueue(image, { mode: 'capacity' })).toMatchObject({ added: false, reason: 'deferred' });
      await waitFor(() => s.done.length === 2, 'the wake-up completed', 20_000);
      expect(s.done[1]).toMatchObject({ id: delayed[0]!.id, result: { dispatched: true } });
      expect(await s.calls()).toEqual(['image:capacity', 'image:capacity']);
      expect(s.failed).toEqual([]);
    }));
});
