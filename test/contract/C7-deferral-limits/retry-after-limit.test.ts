import { type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { failedJob } from '../../helpers/attempts';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C7: a retry by hand after DeferralLimitError starts a fresh chain, with the budget BullMQ gives the job', () => {
  /** A job fails with DeferralLimitError (attempts 2), is retried by hand, defers once (a fresh chain), then its wake-up fails. */
  async function retriedAfterLimit(resetAttemptsMade: boolean) {
    const h = harness({
      retry: { attempts: 2, backoff: fast },
      windows: { capacitySeconds: 0.05, jitter: 0 },
      limits: { maxCapacityDeferrals: 1 },
    });
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the deferral limit');
    expect(failed[0]!.error).toMatchObject({ code: 'DEFERRAL_LIMIT' });
    const deferrals: string[] = [];
    h.engine.on('deferred', (e) => deferrals.push(e.wakeUpJobId));
    await worker.close();
    h.executor.fallback = SENT;
    h.executor.script(image, notSent('no_worker_available'), new Error('down'));
    await (await failedJob(h)).retry('failed', { resetAttemptsMade });
    return { h, deferrals, again: watch(h.engine.createWorker()) };
  }

  it('with resetAttemptsMade: the next wake-up id carries 0 failures, and its first real failure is not final', async () => {
    const { deferrals, again } = await retriedAfterLimit(true);
    await waitFor(() => again.done.some((d) => d.result.dispatched === true), 'dispatched');
    expect(deferrals).toHaveLength(1);
    expect(deferrals[0]).toMatch(/@cap\.1\.0\.0\./);
    expect(again.failed).toHaveLength(1);
    expect(again.failed[0]!.error.name).not.toBe('UnrecoverableError');
  });

  it('without it: the failure DeferralLimitError spent goes along the new chain, and the wake-up fails for good at its first real failure', async () => {
    const { h, deferrals, again } = await retriedAfterLimit(false);
    await waitFor(() => again.failed.length === 1, 'the wake-up failed');
    expect(deferrals).toHaveLength(1);
    expect(deferrals[0]).toMatch(/@cap\.1\.0\.1\./);
    expect(again.failed[0]!.error.message).toMatch(/down/);
    expect(await h.engine.queue.getJobState(again.failed[0]!.id)).toBe('failed');
    expect(h.executor.calls).toHaveLength(4);
  });
});
