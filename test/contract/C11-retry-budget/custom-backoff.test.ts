import { harness, SENT } from '../../helpers/engine';
import { sleep, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * BullMQ's custom backoff: a job added with `backoff: { type: '<name>' }` and a Worker with
 * `settings.backoffStrategy`. docs/producers.md: a job added by hand (no `@` in its id) is
 * dispatched "with any options". When the engine retries such a job itself (a job retried by
 * hand, BullMQ's own count spent), it computed the delay as BullMQ's built-in types only (NaN:
 * at once). a review the processor asks the Worker's strategy itself, once per failure,
 * and retries the job after the delay it gives (BullMQ would ask it again).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C11: a custom backoff strategy', () => {
  it("a job with a custom backoff type retried by hand: the engine retries its next real failure after the strategy's delay (not at once: NaN)", async () => {
    // the engine's own backoff: none (the Worker's custom strategy gives the delay)
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 0 } } });
    h.executor.script(image, new Error('down 1'), new Error('down 2'), new Error('down 3'));
    h.executor.fallback = SENT;
    const own = await h.engine.queue.add('image', data, { attempts: 2, backoff: { type: 'linear-ish' } as never });
    const worker = h.engine.createWorker({ settings: { backoffStrategy: () => 1000 } });
    const { failed, done } = watch(worker);
    await waitFor(async () => (await h.engine.queue.getJobState(own.id!)) === 'failed', 'failed for good', 5000);
    await sleep(100);
    await (await h.engine.queue.getJob(own.id!))!.retry('failed'); // a fresh budget: 2 more tries
    await waitFor(() => done.length === 1, 'the retried job dispatched', 5000);
    const [, , third, fourth] = h.executor.calls;
    // the first failure after the retry waits the strategy's 1000 ms, not NaN (at once); the engine
    // retried 'down 1' itself (BullMQ fails a job, and says 'failed', only for its last failure then)
    expect({ calls: h.executor.calls.length, errors: failed.map((f) => f.error.message) }).toEqual({
      calls: 4,
      errors: ['down 2'],
    });
    expect(fourth!.at - third!.at).toBeGreaterThanOrEqual(900);
  });
});
