import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * a fix (commit 11738c9 / 894ceea keep it: `failsForGood` in
 * src/bullmq/processor.ts, asked by `unsent` in src/dispatch.ts before the release) makes a job's
 * LAST failure release `plain` (no licence), so that it never revokes a live holder (a wake-up
 * whose window ended) only to fail for good. The rule guesses BullMQ's: budget, unrecoverable,
 * maxStartedAttempts. BullMQ has one more way to end a job on a failure: a custom backoff
 * strategy returning -1 ("fail the job immediately", BullMQ's `shouldRetryJob`: `delay == -1`),
 * the usual way to stop retrying a 4xx. `failsForGood` says "not the last" (budget left), so the
 * release is `hold`: the job takes the licence, the wake-up is marked superseded and removed;
 * then BullMQ fails the job for good. Nothing carries the stage any more: lost (the same loss as
 * By another door). docs/producers.md: a job added by hand is dispatched "with any
 * options".
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C11: a custom backoff strategy that stops retrying (-1)', () => {
  it('a job whose custom backoff returns -1 fails after a wake-up window ended: its failure is its last, takes no licence, and the wake-up dispatches the stage (was lost)', async () => {
    const h = harness({ windows: { capacitySeconds: 0.3, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'), new Error('400 bad request'));
    h.executor.fallback = SENT;
    await h.engine.dispatchStage(image, {}); // deferred: a licensed wake-up, due in 0.3 s
    await waitFor(async () => !(await h.engine.isStageDeferred(image)), 'the window ended', 3000);
    // the user's own job for the stage, with budget left but a strategy that gives up on a 4xx (lifo: runs first)
    const own = await h.engine.queue.add('image', data, {
      lifo: true,
      attempts: 3,
      backoff: { type: 'no-retry-on-4xx' } as never,
    });
    const worker = h.engine.createWorker({
      concurrency: 1,
      settings: {
        backoffStrategy: (_n: number, _t?: string, err?: Error) => (err?.message.startsWith('4') ? -1 : 100),
      },
    });
    const { done, failed } = watch(worker);
    await waitFor(() => failed.length >= 1, 'the user job failed', 5000);
    await waitFor(() => done.some((d) => d.result.dispatched), 'the stage dispatched by its wake-up', 3000).catch(
      () => undefined,
    );
    const counts = await h.engine.queue.getJobCounts('wait', 'delayed', 'active', 'prioritized');
    expect({
      failedForGood: failed[0]!.id === own.id && (await h.engine.queue.getJobState(own.id!)) === 'failed',
      dispatched: h.executor.calls.filter((c) => c.result?.dispatched).length,
      jobsLeft: counts,
    }).toEqual({
      failedForGood: true,
      dispatched: 1,
      jobsLeft: { wait: 0, delayed: 0, active: 0, prioritized: 0 },
    });
  });
});

describe('C11: the Worker strategy of a custom backoff type is asked once per failure', () => {
  it("a custom strategy is called once per real failure, with the failure's number, and the job waits the delay it gave", async () => {
    const h = harness();
    h.executor.script(image, new Error('500 one'), new Error('500 two'));
    h.executor.fallback = SENT;
    const asked: number[] = [];
    await h.engine.queue.add('image', data, { attempts: 5, backoff: { type: 'counted' } as never });
    const worker = h.engine.createWorker({
      settings: { backoffStrategy: (n: number) => (asked.push(n), 300) },
    });
    const { done } = watch(worker);
    await waitFor(() => done.length === 1, 'the job dispatched', 5000);
    const [first, second, third] = h.executor.calls;
    expect({ asked, calls: h.executor.calls.length }).toEqual({ asked: [1, 2], calls: 3 });
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(250);
    expect(third!.at - second!.at).toBeGreaterThanOrEqual(250);
  });

  it("a custom strategy that throws ends the job for good with the executor's error (BullMQ could not retry it either)", async () => {
    const h = harness();
    h.executor.script(image, new Error('500 boom'));
    h.executor.fallback = SENT;
    const own = await h.engine.queue.add('image', data, { attempts: 5, backoff: { type: 'broken' } as never });
    const worker = h.engine.createWorker({
      settings: {
        backoffStrategy: () => {
          throw new Error('strategy bug');
        },
      },
    });
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the job failed', 5000);
    expect({
      error: failed[0]!.error.message,
      state: await h.engine.queue.getJobState(own.id!),
      calls: h.executor.calls.length,
    }).toEqual({ error: '500 boom', state: 'failed', calls: 1 });
  });
});
