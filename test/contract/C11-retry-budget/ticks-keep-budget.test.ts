import { type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { failingJob } from '../../helpers/attempts';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C11: a host's ticks do not erase the retry budget", () => {
  it('a direct capacity deferral while a wake-up waits out its backoff carries its failures', async () => {
    const h = harness({
      retry: { attempts: 2, backoff: { type: 'fixed', delay: 60_000 } },
      windows: { capacitySeconds: 0.05, jitter: 0 },
    });
    const { failed } = await failingJob(
      h,
      [notSent('no_worker_available'), new Error('down #1')],
      1,
      'the wake-up failed once, now in backoff',
    );
    // the host's tick: a capacity answer defers the stage, revoking the wake-up in backoff
    h.executor.script(image, notSent('no_worker_available'), new Error('down #2'), SENT);
    // the id comes from the event, not from listDeferred: the 50 ms window may be over by the time we look
    const ids: string[] = [];
    h.engine.on('deferred', (e) => ids.push(e.wakeUpJobId));
    const r = await h.engine.dispatchStage(image, {});
    expect(r.reason).toBe('no_worker_available');
    // the new wake-up carries the failure: its first real failure is the chain's second, and final
    expect(ids).toEqual([expect.stringMatching(/@cap\.2\.0\.1\./)]);
    await waitFor(() => failed.length === 2, 'the second real failure');
    expect(failed[1]!.error.name).toBe('UnrecoverableError');
    expect(h.executor.calls.filter((_, i) => i > 0)).toHaveLength(3);
    expect(await h.engine.queue.getJobCounts('failed', 'delayed')).toEqual({ failed: 1, delayed: 0 });
  });
});
