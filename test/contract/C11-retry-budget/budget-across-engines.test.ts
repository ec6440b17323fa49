import { harness, notSent, teardown } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { watch } from '../../helpers/jobs';

/**
 * The job's own opts.attempts governs its budget, and a wake-up inherits the
 * deferring job's. A host tick on an engine with another retry.attempts that
 * defers the stage while a wake-up waits out its backoff (10.2) revokes that
 * wake-up and carries its failures, but gives the new wake-up the host
 * engine's attempts: the chain's budget changes with whoever ticked.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C11: a chain started with attempts 2, ticked by a host engine with attempts 5', () => {
  it('the wake-up of the direct deferral keeps the chain budget (attempts 2)', async () => {
    const worker = harness({
      retry: { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      windows: { capacitySeconds: 0.05, jitter: 0 },
    });
    const host = harness(
      { retry: { attempts: 5, backoff: { type: 'fixed', delay: 10 } }, windows: { capacitySeconds: 60, jitter: 0 } },
      { prefix: worker.prefix, queueName: worker.queueName },
    );
    worker.executor.script(image, notSent('no_worker_available'), new Error('down #1'));
    await worker.engine.enqueue(image, {});
    const { failed } = watch(worker.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the wake-up failed once, in its 60 s backoff');
    host.executor.script(image, notSent('no_worker_available'));
    expect((await host.engine.dispatchStage(image, {})).reason).toBe('no_worker_available');
    const [d] = await host.engine.listDeferred();
    expect(d!.wakeUpJobId).toMatch(/@cap\.2\.0\.1\./); // the failure is carried ...
    const job = (await host.engine.queue.getJob(d!.wakeUpJobId))!;
    expect(job.opts.attempts).toBe(2); // ... but not the budget it counts against
  });
});
