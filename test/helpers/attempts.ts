import type { Job } from 'bullmq';
import type { DispatchContext, ExecutorResult, StageRef } from '../../src';
import { type Answer, type Harness, harness, notSent, SENT } from './engine';
import { fast, latch, watch } from './jobs';
import { waitFor } from './redis';

/** Attempt scaffolding shared by the contract's dispatch suites. */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

export function completions(
  h: ReturnType<typeof harness>,
  worker: ReturnType<ReturnType<typeof harness>['engine']['createWorker']>,
) {
  const done: { id: string; result: unknown }[] = [];
  const failed: { id: string; message: string; attemptsMade: number; error: Error }[] = [];
  worker.on('completed', (job, result) => done.push({ id: job.id as string, result }));
  worker.on('failed', (job, err) =>
    failed.push({ id: job?.id as string, message: err.message, attemptsMade: job?.attemptsMade ?? -1, error: err }),
  );
  return { done, failed };
}

/**
 * A stage whose job failed for good (its one capacity deferral spent). A later deferral of it may ask for a
 * window up to `capacityMaxSeconds` with `retryAfterMs` (its own base window is 50 ms).
 */
export async function failedForGood(capacityMaxSeconds?: number) {
  const h = harness({
    windows: { capacitySeconds: 0.05, capacityMaxSeconds, jitter: 0 },
    limits: { maxCapacityDeferrals: 1 },
  });
  h.executor.fallback = notSent('no_worker_available');
  await h.engine.enqueue(image, {});
  const worker = h.engine.createWorker();
  const { failed, done } = completions(h, worker);
  await waitFor(() => failed.length === 1, 'terminal failure');
  return { h, worker, done };
}

export async function failingJob(h: Harness, answers: Answer[], failures: number, what: string) {
  h.executor.script(image, ...answers);
  await h.engine.enqueue(image, {});
  const worker = h.engine.createWorker();
  const jobs = watch(worker);
  await waitFor(() => jobs.failed.length === failures, what);
  return { worker, ...jobs };
}

export async function failedJob(h: Harness): Promise<Job> {
  return waitFor(async () => (await h.engine.queue.getJobs(['failed']))[0], 'a failed job');
}

export function blocking(answer: 'throw' | ExecutorResult<string>) {
  const started = latch<DispatchContext>();
  const released = latch();
  const fn = async (_ref: StageRef, _p: unknown, ctx: DispatchContext): Promise<ExecutorResult<string>> => {
    started.open(ctx);
    await Promise.race([released.opened, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
    if (answer === 'throw') throw ctx.signal.reason ?? new Error('aborted');
    return answer;
  };
  return { fn, started: started.opened, release: () => released.open() };
}

export const untilAborted = (ctx: DispatchContext) =>
  new Promise<ExecutorResult<string>>((_resolve, reject) => {
    if (ctx.signal.aborted) reject(ctx.signal.reason as Error);
    else ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
  });

export function recording(
  answer: (ref: StageRef, ctx: DispatchContext) => Promise<ExecutorResult<string>>,
  overrides: Parameters<typeof harness>[0] = {},
) {
  const seen: { ref: StageRef; ctx: DispatchContext }[] = [];
  const h = harness({
    ...overrides,
    executor: (ref, _payload, ctx) => {
      seen.push({ ref, ctx });
      return answer(ref, ctx);
    },
  });
  const ctxOf = (ref: StageRef) => seen.find((s) => s.ref.stage === ref.stage)?.ctx;
  return { h, seen, ctxOf };
}

export function dropsAfterFirstDeferral(backoffMs: number) {
  let thrown = false;
  return harness({
    windows: { capacitySeconds: 0.05, jitter: 0 },
    retry: { attempts: 3, backoff: { type: 'fixed', delay: backoffMs } },
    faultHook: (point) => {
      if (point === 'deferral-recorded' && !thrown) {
        thrown = true;
        throw new Error('connection closed after the deferral was written');
      }
    },
  });
}

/**
 * A wake-up of `ref` fails for good (kept: the failed-job record): the executor was called twice
 * (the capacity answer, the wake-up's failure); `worker` runs on.
 */
export async function failedWakeUp(ref: StageRef) {
  const h = harness({ retry: { attempts: 1, backoff: fast }, windows: { capacitySeconds: 0.05, jitter: 0 } });
  h.executor.script(ref, notSent('no_worker_available'), new Error('down'), SENT);
  await h.engine.enqueue(ref, {});
  const worker = h.engine.createWorker();
  const { done, failed } = watch(worker);
  await waitFor(() => failed.length === 1, 'the wake-up failed for good');
  const wakeUp = (await h.engine.queue.getJobs(['failed']))[0]!;
  expect(wakeUp.data).toMatchObject({ class: 'capacity', reason: 'no_worker_available' });
  return { h, worker, wakeUp, done, failed };
}

/** `failedWakeUp`, then the host cancels the stage ('book withdrawn'). */
export async function failedWakeUpCancelled(ref: StageRef) {
  const failedOne = await failedWakeUp(ref);
  await failedOne.h.engine.cancelActiveDispatch(ref, 'book withdrawn');
  return failedOne;
}
