import { harness, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { watch } from '../../helpers/jobs';

/**
 * README: a job that finds its stage in flight "is delayed by inFlightRetryMs,
 * no attempt spent". Each such delay is a BullMQ start (`ats`), and a Worker
 * with `maxStartedAttempts` (a BullMQ worker option createWorker passes on)
 * fails a job for good once starts pass it (BullMQ itself, before the
 * processor, or at the engine's next real failure, which it then records).
 * The engine cannot stop BullMQ counting those starts; a retry by hand (with
 * `resetAttemptsStarted`) runs the stage again with a fresh budget
 * (docs/design.md: "The retry budget").
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C12: in-flight delays and maxStartedAttempts', () => {
  it("a job delayed 'dispatch_in_flight' until maxStartedAttempts fails for good, recorded: a retry by hand runs it", async () => {
    let releaseDirect!: () => void;
    const held = new Promise<void>((r) => (releaseDirect = r));
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } }, inFlightRetryMs: 100 });
    // the host's direct dispatch holds the stage for a while
    h.executor.script(image, async () => {
      await held;
      return SENT;
    });
    const direct = h.engine.dispatchStage(image, {});
    const { jobId } = await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker({ maxStartedAttempts: 4 }));
    await waitFor(
      async () => ((await h.engine.queue.getJob(jobId!))?.attemptsStarted ?? 0) >= 4,
      'four in-flight starts',
    );
    h.executor.script(image, new Error('down #1'));
    releaseDirect();
    await direct;
    await waitFor(() => failed.length >= 1, 'the first real failure');
    await waitFor(async () => (await h.engine.queue.getJobState(jobId!)) === 'failed', 'failed for good');
    // retried by hand: a fresh budget (its first real failure is not final), then it dispatches
    h.executor.script(image, new Error('down #2'), SENT);
    await (await h.engine.queue.getJob(jobId!))!.retry('failed', {
      resetAttemptsMade: true,
      resetAttemptsStarted: true,
    });
    await waitFor(async () => (await h.engine.queue.getJobState(jobId!)) === 'unknown', 'dispatched and removed');
    expect(h.executor.calls.filter((c) => c.ref.stage === 'image')).toHaveLength(4);
  });
});
