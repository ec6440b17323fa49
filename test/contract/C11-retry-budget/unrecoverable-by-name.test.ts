import { FREE, retriedAfterCancel, stageView } from '../../helpers/observe';
import { Worker } from 'bullmq';
import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * Check of with bullmq a peer, an app may hold two copies (a
 * Worker of the app's, the plugin's own); BullMQ knows an UnrecoverableError
 * by its name too (`err.name == 'UnrecoverableError'`), so the app's copy's
 * class fails a job for good. The engine must see it the same way and record
 * the job as failed for good, not leave it holding the stage's licence. On
 * the README's way, the user's own Worker running engine.processor, no
 * `failed` listener of the engine's records it afterwards (createWorker's does).
 */
const ref = { scope: ['book-1'], stage: 'image' };

describe("C11: an UnrecoverableError of another bullmq copy (BullMQ's test: its name)", () => {
  it("on a user's own Worker, an executor error named UnrecoverableError that is not the plugin copy's class is recorded as failed for good, as BullMQ ends the job", async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    const foreign = Object.assign(new Error('the app copy of bullmq says: do not retry'), {
      name: 'UnrecoverableError',
    });
    h.executor.script(ref, foreign);
    const worker = new Worker(h.queueName, h.engine.processor, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
    });
    const { failed } = watch(worker);
    try {
      await h.engine.enqueue(ref, null);
      await waitFor(() => failed.length === 1, 'the job to fail');
    } finally {
      await worker.close();
    }
    expect(failed[0]).toMatchObject({ attemptsMade: 1 });
    expect(await h.engine.queue.getJobState(failed[0]!.id)).toBe('failed');
    // on record as failed for good: a cancel reaches it (retried by hand, it sends nothing), and it holds nothing
    expect(await stageView(h.engine, ref)).toEqual(FREE);
    const retried = await retriedAfterCancel(h, ref, failed[0]!.id);
    expect({ calls: retried.calls, failedAgain: retried.state === 'failed' }).toEqual({ calls: 0, failedAgain: false });
  });
});
