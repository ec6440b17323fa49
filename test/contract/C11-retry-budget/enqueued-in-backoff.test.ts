import { harness, notSent, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { watch } from '../../helpers/jobs';

/**
 * 10.2 made a direct deferral carry the failures of a *wake-up* waiting out its
 * backoff (it is the stage's licence). A job added by `enqueue` (or by hand)
 * holds no licence while it waits out its backoff, so the host's tick neither
 * sees its failures nor supersedes it.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

async function idle(h: ReturnType<typeof harness>) {
  await waitFor(
    async () => {
      const c = await h.engine.queue.getJobCounts('active', 'wait', 'delayed');
      return (c.active ?? 0) + (c.wait ?? 0) + (c.delayed ?? 0) === 0;
    },
    'the queue idle',
    15_000,
  );
}

describe('C11: an enqueued job in its retry backoff and a host tick', () => {
  it('real failures of the chain never exceed retry.attempts (2)', async () => {
    const h = harness({
      retry: { attempts: 2, backoff: { type: 'fixed', delay: 600 } },
      windows: { capacitySeconds: 0.1, jitter: 0 },
    });
    // R fails once; the host's tick defers the stage; everything after that fails
    h.executor.script(image, new Error('down #1'), notSent('no_worker_available'));
    h.executor.script(image, ...Array.from({ length: 8 }, (_, i) => new Error(`down #${i + 2}`)));
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the enqueued job failed once, now in backoff');
    expect((await h.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    await idle(h);
    const realFailures = h.executor.calls.length - 1; // every call but the capacity answer threw
    expect(realFailures).toBeLessThanOrEqual(2);
  });

  it('a direct success while the enqueued job waits out its backoff: the stage is not dispatched a second time', async () => {
    // a 60 s backoff: the direct call comes while the job waits it out, however slow the machine
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } } });
    h.executor.script(image, new Error('down'), SENT, SENT);
    const { jobId } = await h.engine.enqueue(image, {});
    const { failed, done } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'failed once, in backoff');
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    // the job's backoff ends now, if the job is still there to run again
    const held = await h.engine.queue.getJob(jobId!);
    if (held && (await held.isDelayed())) await held.promote();
    // "dispatched: true — done; nothing of the stage is left in Redis"
    await idle(h);
    expect(done.map((d) => d.result.dispatched)).not.toContain(true);
    expect(h.executor.calls).toHaveLength(2);
  });
});
