import type { EngineEvents, ExecutorResult, StageRef } from '../../src';
import { harness, notSent, SENT, type Answer, type Harness } from './engine';
import { fast, watch } from './jobs';
import { waitFor } from './redis';

/** Runs of a stage through an engine's own worker, as several test files make them. */

type Watched = ReturnType<typeof watch>;

/**
 * Runs one enqueued job of `ref` through the engine's worker (3 attempts, a
 * fast backoff). The executor answers `script` first, in order, then
 * `fallback` to every call. Resolves once `until` holds for BullMQ's
 * completed and failed jobs (by default: the job completed, or failed three
 * times), with what happened: the harness, those jobs, and the engine's
 * `resultInvalid` and `failed` events.
 */
export async function viaJob(
  ref: StageRef,
  answers: { script?: Answer[]; fallback: ExecutorResult<string> },
  until: { ended: (jobs: Watched) => boolean; what: string; timeoutMs?: number } = {
    // a completion ends the job: a retry (the defect) would have had to fail it first
    ended: ({ done, failed }) => done.length > 0 || failed.length >= 3,
    what: 'the job completed (or failed three times)',
  },
) {
  const h = harness({ retry: { attempts: 3, backoff: fast } });
  if (answers.script) h.executor.script(ref, ...answers.script);
  h.executor.fallback = answers.fallback;
  const invalid: EngineEvents['resultInvalid'][] = [];
  h.engine.on('resultInvalid', (e) => invalid.push(e));
  const engineFailed: string[] = [];
  h.engine.on('failed', (e) => engineFailed.push(e.reason));
  const jobs = watch(h.engine.createWorker());
  await h.engine.enqueue(ref, {});
  await waitFor(() => until.ended(jobs), until.what, until.timeoutMs);
  return { h, ...jobs, invalid, engineFailed };
}

/** For `viaJob`: until the job completed or failed once, within 8 s. */
export const settledOnce = {
  ended: ({ done, failed }: Watched) => done.length + failed.length >= 1,
  what: 'the job settled',
  timeoutMs: 8000,
};

/**
 * Dispatches `payload` to `ref` on an engine whose executor answers capacity
 * once (a 50 ms window), then runs the wake-up: `refused`, what
 * dispatchStage threw, when it refused the payload; else the payloads the
 * executor got on the first call and on the wake-up's.
 */
export async function payloadThroughWakeUp(
  ref: StageRef,
  payload: unknown,
): Promise<{ refused: unknown } | { first: unknown; woken: unknown }> {
  const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 } });
  h.executor.script(ref, notSent('no_worker_available'));
  let first;
  try {
    first = await h.engine.dispatchStage(ref, payload);
  } catch (e) {
    return { refused: e };
  }
  expect(first.reason).toBe('no_worker_available');
  const { done } = watch(h.engine.createWorker());
  await waitFor(() => done.length === 1, 'the wake-up ran');
  return { first: h.executor.calls[0]!.payload, woken: h.executor.calls[1]!.payload };
}

/**
 * Defers `ref` by a direct dispatchStage on an engine with a
 * `capacitySeconds` window (no jitter); its executor answers capacity, then
 * SENT. Resolves the harness and the deferral's `until` (its `deferred`
 * event's).
 */
export async function deferredOnce(ref: StageRef, capacitySeconds: number): Promise<{ h: Harness; until: number }> {
  const h = harness({ windows: { capacitySeconds, jitter: 0 } });
  h.executor.script(ref, notSent('no_worker_available'), SENT);
  let until = 0;
  h.engine.on('deferred', (e) => (until = e.until));
  await h.engine.dispatchStage(ref, {});
  return { h, until };
}

/**
 * Runs the engine's worker until the (one) wake-up ran, within 12 s:
 * resolves its result, and when `clock` said it was dispatched.
 */
export async function runWakeUp(h: Harness, clock: () => number) {
  let calledAt = 0;
  h.engine.on('dispatched', () => (calledAt = clock()));
  const { done } = watch(h.engine.createWorker());
  await waitFor(() => done.length === 1, 'the wake-up ran', 12_000);
  return { result: done[0]!.result, calledAt };
}
