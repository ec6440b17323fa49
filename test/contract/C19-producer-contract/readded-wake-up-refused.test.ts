import type { Job } from 'bullmq';
import { waitFor } from '../../helpers/redis';
import { failedWakeUp, failedWakeUpCancelled } from '../../helpers/attempts';
import { InvalidJobOptionsError, type StageRef } from '../../../src';

/**
 * A wake-up fails for good; an operator re-adds it in Bull Board's way, `queue.add(job.name,
 * job.data)`, after the host cancelled the stage or before: a job under BullMQ's own id is not a
 * dispatch job (a cancel reaches the jobs that exist when it runs; a new intent is a new
 * `enqueue`), so it fails at once with INVALID_JOB_OPTIONS whenever it runs.
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

describe('C19: a failed wake-up re-added by hand before a cancel', () => {
  it.each([
    ['no options', () => undefined],
    ['its own options', (job: Job) => job.opts],
  ] as [string, (job: Job) => Job['opts'] | undefined][])(
    're-added with queue.add(job.name, job.data, %s), then the stage cancelled: the re-added job, run after the cancel, fails at once with INVALID_JOB_OPTIONS, never dispatched',
    async (_, opts) => {
      const { h, worker, wakeUp, done, failed } = await failedWakeUp(image);
      // held until the cancel has run: the re-added job waits through it
      await worker.pause();
      const readded = await h.engine.queue.add(wakeUp.name, wakeUp.data, opts(wakeUp));
      expect(readded.id).not.toBe(wakeUp.id);
      await h.engine.cancelStage(image, 'book withdrawn');
      // the cancel did not silently take it away: it waits to be refused
      expect(['waiting', 'delayed']).toContain(await readded.getState());
      worker.resume();
      await waitFor(() => failed.length === 2, 'the re-added job ran');
      expect(failed[1]).toMatchObject({ id: readded.id, error: { code: 'INVALID_JOB_OPTIONS', jobId: readded.id } });
      expect(failed[1]!.error).toBeInstanceOf(InvalidJobOptionsError);
      expect(await readded.getState()).toBe('failed');
      expect({ done: done.length, calls: h.executor.calls.length }).toEqual({ done: 1, calls: 2 });
    },
  );
});
