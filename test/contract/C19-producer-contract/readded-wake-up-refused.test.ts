import { waitFor } from '../../helpers/redis';
import { failedWakeUpCancelled } from '../../helpers/attempts';
import type { StageRef } from '../../../src';

/**
 * A wake-up fails for good; the host cancels the stage; an operator re-adds the wake-up in Bull
 * Board's way, `queue.add(job.name, job.data)`: a job under BullMQ's own id is not a dispatch job
 * (a cancel reaches the jobs that exist when it runs; a new intent is a new `enqueue`).
 */
const image: StageRef = { scope: ['book-26', 'ch-6', 'sc-1'], stage: 'image' };

describe('C19: a failed wake-up re-added by hand after a cancel', () => {
  it('re-added with queue.add(job.name, job.data), it fails at once with INVALID_JOB_OPTIONS, never dispatched', async () => {
    const { h, wakeUp, failed } = await failedWakeUpCancelled(image);
    const readded = await h.engine.queue.add(wakeUp.name, wakeUp.data);
    await waitFor(() => failed.length === 2, 'the re-added job failed');
    expect(failed[1]).toMatchObject({ id: readded.id, error: { code: 'INVALID_JOB_OPTIONS' } });
    expect(await readded.getState()).toBe('failed');
    expect(h.executor.calls).toHaveLength(2);
  });
});
