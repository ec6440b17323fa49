import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { fast, watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * A wake-up fails for good (kept: the failed-job record); the host cancels the stage; an operator
 * retries the failed wake-up (it completes as cancelled), then re-adds it in Bull Board's way,
 * `queue.add(job.name, job.data)`: a job under BullMQ's own id is not a dispatch job and fails at
 * once with `INVALID_JOB_OPTIONS`, never dispatched (a cancel reaches the jobs that exist when it
 * runs; a new intent is a new `enqueue`).
 */
const image: StageRef = { scope: ['book-26', 'ch-6', 'sc-1'], stage: 'image' };

describe('C9: a failed wake-up retried or re-added by hand after a cancel', () => {
  it('the failed wake-up, retried, completes as cancelled; re-added with queue.add(job.name, job.data) it fails at once with INVALID_JOB_OPTIONS, never dispatched', async () => {
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
    // a job added by hand under BullMQ's own id: not a dispatch job, refused
    const readded = await h.engine.queue.add(wakeUp.name, wakeUp.data);
    await waitFor(() => failed.length === 2, 'the re-added job failed');
    expect(failed[1]).toMatchObject({ id: readded.id, error: { code: 'INVALID_JOB_OPTIONS' } });
    expect(await readded.getState()).toBe('failed');
    expect(h.executor.calls).toHaveLength(2);
  }, 30_000);
});
