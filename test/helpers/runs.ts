import type { EngineEvents, ExecutorResult, StageRef } from '../../src';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Worker } from 'bullmq';
import { harness, notSent, SENT, type Answer, type Harness } from './engine';
import { fast, watch } from './jobs';
import { redisOptions, waitFor } from './redis';

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

/**
 * Host A, a plain BullMQ Worker whose clock runs `aheadMs` ahead, fetches its next job (an
 * `other` job, older than the wake-up): BullMQ promotes what is due by A's clock, the wake-up
 * too. Then host B, with the right clock, runs the engine's worker: `runWakeUp`'s answer.
 */
export async function promotedByClockAhead(h: Harness, real: () => number, aheadMs = 6000) {
  const a = new Worker(h.queueName, undefined, {
    connection: { ...redisOptions(), maxRetriesPerRequest: null },
    prefix: h.prefix,
    autorun: false,
  });
  try {
    const ahead = jest.spyOn(Date, 'now').mockImplementation(() => real() + aheadMs);
    let taken;
    try {
      taken = await a.getNextJob('host-a');
    } finally {
      ahead.mockRestore();
    }
    expect(taken?.name).toBe('other');
    expect(await h.engine.queue.getJobCounts('wait', 'delayed')).toMatchObject({ wait: 1, delayed: 0 });
    return await runWakeUp(h, real);
  } finally {
    await a.close(true);
  }
}

/**
 * Host A: a child process running test/helpers/ahead-host.ts (a dispatch
 * engine and a Worker, not started) on `h`'s queue, with `clock` (a `--require` preload that
 * shifts its Date.now by CLOCK_AHEAD_MS, 6 s) for its clock. Resolves once it said 'ready';
 * `said()` is all it printed so far; `kill()` stops it by SIGKILL.
 */
export async function spawnAheadHost(h: Harness, clock: string) {
  const { host, port } = redisOptions();
  const child = spawn(process.execPath, ['--require', clock, '--import', 'tsx', join(__dirname, 'ahead-host.ts')], {
    env: {
      ...process.env,
      CLOCK_AHEAD_MS: '6000',
      REDIS_URL: `redis://${host}:${port}`,
      PREFIX: h.prefix,
      QUEUE: h.queueName,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let said = '';
  child.stdout!.on('data', (d: Buffer) => (said += d.toString()));
  const kill = () => child.kill('SIGKILL');
  try {
    await waitFor(() => said.includes('ready'), 'host A ready', 20_000);
  } catch (error) {
    kill();
    throw error;
  }
  return { child, said: () => said, kill };
}
