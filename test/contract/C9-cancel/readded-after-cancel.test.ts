import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { fast, watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Path: a wake-up fails for good (kept: the failed-job record); the host cancels the
 * stage (`cancelActiveDispatch`: the failed wake-up is marked cancelled); an operator then re-adds
 * the failed wake-up in Bull Board's way, `queue.add(job.name, job.data)`.
 * Expected: README, operator table, row "retries a failed job (...), retries a kept completed
 * job, or re-adds a failed wake-up with `queue.add(job.name, job.data)`": "the stage is
 * dispatched ..., unless it is deferred (suppressed), in flight (delayed until it is not), or
 * was cancelled after the job failed (completes as cancelled)".
 * What happens: the cancel's mark lives on the failed job's own hash (CANCEL in
 * src/lua/scripts.ts: a mark on each job it knows of) and the stage keeps nothing of it;
 * the re-added job is a new job under a new id, with no mark and nothing left to find, so begin
 * runs it and the cancelled stage is sent. (Either the README row over-promises for the re-add
 * path, or the cancel must leave something a re-added job of the stage meets.)
 * Resolved in the README: the row over-promised. A cancel reaches the jobs that exist when it
 * runs (the failed job itself: retried by hand, it completes as cancelled); a job added after it,
 * by hand or by `enqueue`, is a new intent and runs. The test pins that.
 */
const image: StageRef = { scope: ['book-26', 'ch-6', 'sc-1'], stage: 'image' };

describe('C9: a failed wake-up re-added by hand after a cancel', () => {
  it('a stage cancelled after its wake-up failed is dispatched when an operator then re-adds the wake-up with queue.add(job.name, job.data) (a new job the cancel never saw); the failed job itself, retried, completes as cancelled', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), new Error('down'), SENT);
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the wake-up failed for good');
    const wakeUp = (await h.engine.queue.getJobs(['failed']))[0]!;
    expect(wakeUp.data).toMatchObject({ class: 'capacity', reason: 'no_worker_available' });
    await h.engine.cancelActiveDispatch(image, 'book withdrawn');
    // the failed job itself, retried by hand: the cancel marked it
    await wakeUp.retry('failed');
    await waitFor(() => done.length === 2, 'the retried job ran');
    expect(done[1]!.result).toMatchObject({ cancelled: true });
    expect(h.executor.calls).toHaveLength(2);
    // a new job added by hand after the cancel: the operator's new intent, sent
    await h.engine.queue.add(wakeUp.name, wakeUp.data);
    await waitFor(() => done.length === 3, 'the re-added job ran');
    expect(done[2]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(3);
  }, 30_000);
});
