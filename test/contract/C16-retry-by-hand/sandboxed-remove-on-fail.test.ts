import { inSandbox, SANDBOXES } from '../../helpers/sandbox';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';

/**
 * The Worker's `removeOnFail` with a sandboxed processor (README, "Sandboxed processors"): the
 * child's engine cannot read the Worker's options (BullMQ hands the child the job, not its
 * Worker); the parent's `attachWorker` sees the job go.
 */
const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe.each(SANDBOXES)('C16: a job failed for good by a sandboxed processor in %s', (_, useWorkerThreads) => {
  it("C16: that the Worker's removeOnFail removes leaves no failed-job record", () =>
    inSandbox(
      useWorkerThreads,
      async (s) => {
        const { jobId } = await s.h.engine.enqueue(image, { mode: 'fail' });
        await waitFor(() => s.failed.length === 2, 'failed for good', 20_000);
        expect(await s.h.engine.queue.getJob(jobId!)).toBeUndefined();
        // (the parent's listener runs after BullMQ's removal, a moment after the 'failed' event)
        await waitFor(async () => (await keptFor(s.h, image)).length === 0, 'no record of the stage', 5_000).catch(
          () => undefined,
        );
        expect(await keptFor(s.h, image)).toEqual([]);
      },
      { removeOnFail: { count: 0 } },
    ));
});
