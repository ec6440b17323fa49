import { waitFor } from '../../helpers/redis';
import { failedWakeUpCancelled } from '../../helpers/attempts';
import type { StageRef } from '../../../src';

/**
 * A wake-up fails for good (kept: the failed-job record); the host cancels the stage; an operator
 * retries the failed wake-up by hand: the cancel marked it, it completes as cancelled. (Re-added
 * with `queue.add`, it is no dispatch job: C19.)
 */
const image: StageRef = { scope: ['book-26', 'ch-6', 'sc-1'], stage: 'image' };

describe('C9: a failed wake-up retried by hand after a cancel', () => {
  it('completes as cancelled, never dispatched', async () => {
    const { h, wakeUp, done } = await failedWakeUpCancelled(image);
    await wakeUp.retry('failed');
    await waitFor(() => done.length === 2, 'the retried job ran');
    expect(done[1]!.result).toMatchObject({ cancelled: true });
    expect(h.executor.calls).toHaveLength(2);
  });
});
