import { harness, notSent, teardown } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { addProducerJob } from '../../helpers/producer-job';
import { fast, watch, queued } from '../../helpers/members';

/**
 * A wake-up fails once and waits out its backoff, holding the stage's licence; a producer's job
 * for the stage (added without the probe) begins meanwhile. It completes as `superseded`: it
 * neither takes the stage nor restarts the chain, so the wake-up's failures count on and the
 * chain's real failures never exceed its attempts.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C11: a producer job that begins while a wake-up waits out its backoff', () => {
  it('completes as superseded: real failures of the chain never exceed attempts (3)', async () => {
    const h = harness({
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 500 } },
      windows: { capacitySeconds: 0.05, jitter: 0 },
    });
    // enqueued job: capacity -> wake-up W; W fails once and waits out its backoff
    h.executor.script(image, notSent('no_worker_available'), new Error('down #1'));
    h.executor.script(image, ...Array.from({ length: 6 }, (_, i) => new Error(`down #${i + 2}`)));
    await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the wake-up failed once, in its backoff');
    const own = await addProducerJob(h.engine.queue, image, { backoff: fast });
    await waitFor(async () => (await h.engine.queue.getJobCounts('failed')).failed === 1, 'failed for good', 10_000);
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    expect(done.find((d) => d.id === own.id)?.result).toMatchObject({ dispatched: false, reason: 'superseded' });
    const realFailures = h.executor.calls.length - 1; // every call but the capacity answer threw
    expect(realFailures).toBe(3);
  });
});
