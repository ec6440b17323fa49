import type { EngineEvents, ExecutorResult, StageRef } from '../../src';
import { harness, type Answer } from './engine';
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
  answers: { script?: Answer[]; fallback: ExecutorResult },
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
