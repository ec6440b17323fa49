import { inSandbox, SANDBOXES } from '../../helpers/sandbox';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';

/**
 * The Worker of a sandboxed processor (README, "Sandboxed processors") closed while its child
 * dispatches a stage: the close waits for the dispatch, as BullMQ's close waits for its jobs;
 * the child's engine needs no close of its own.
 */
const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe.each(SANDBOXES)(
  'C24: closing the Worker of a sandboxed processor in %s mid-dispatch',
  (_, useWorkerThreads) => {
    it('C24: waits for the running dispatch: the job completes as sent and nothing of the stage is left', () =>
      inSandbox(useWorkerThreads, async (s) => {
        const { jobId } = await s.h.engine.enqueue(image, { mode: 'held' });
        await waitFor(async () => (await s.calls()).length === 1, 'the executor to start', 20_000);
        let closed = false;
        const closing = s.worker.close().then(() => (closed = true));
        await s.h.redis.set(`${s.h.prefix}:test:release`, '1');
        await closing;
        expect(closed).toBe(true);
        expect(s.done).toEqual([{ id: jobId, result: expect.objectContaining({ dispatched: true }) }]);
        expect(await s.h.engine.queue.getJobState(jobId!)).not.toBe('active');
        expect(await keptFor(s.h, image)).toEqual([]);
      }));
  },
);
