import { harness, notSent, teardown } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { fast, watch, queued } from '../../helpers/members';

/**
 * A job that is not the stage's licence holder fails and is retried: HOLD
 * revokes the holder (a wake-up waiting out its own backoff, whose id carries
 * the chain: deferral counts and earlier failures) and installs the failing
 * job's member `<sid>@j.<id>`, which carries nothing. At that job's next
 * begin the licence is its own (`carried = 0`) and `parseLicence` of an
 * `@j.` member is null: the chain starts afresh, and the failures spent by
 * the revoked wake-up vanish from the budget.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C11: HOLD by a job that is not the licence holder', () => {
  it('real failures of one chain never exceed attempts (3) when a job added by hand fails during a wake-up backoff', async () => {
    const h = harness({
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } },
      windows: { capacitySeconds: 0.05, jitter: 0 },
    });
    // enqueued job: capacity -> wake-up W; W fails once and waits out its 60 s backoff
    h.executor.script(image, notSent('no_worker_available'), new Error('down #1'));
    h.executor.script(image, ...Array.from({ length: 6 }, (_, i) => new Error(`down #${i + 2}`)));
    await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the wake-up failed once, in its backoff');
    // the host's own producer adds a job for the stage (its begin carries W's failure: the engine
    // treats it as the same chain)
    await h.engine.queue.add(
      'image',
      { v: 1, scope: image.scope, stage: image.stage, payload: {} },
      { attempts: 3, backoff: fast },
    );
    await waitFor(async () => (await h.engine.queue.getJobCounts('failed')).failed === 1, 'failed for good', 10_000);
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    const realFailures = h.executor.calls.length - 1; // every call but the capacity answer threw
    expect(realFailures).toBeLessThanOrEqual(3);
  });
});
