import { Queue, Worker, type Job } from 'bullmq';
import type { DispatchJobData } from '../../src';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, bullConnection, client, dropPrefix } from '../lib/redis';
import { engine, SENT } from '../lib/stages';
import { interleave, log, median } from '../lib/stats';

export type Variant = 'raw' | 'plugin';

/**
 * Happy path: every dispatch succeeds, the executor is a no-op. The same
 * number of jobs is added with `addBulk` (plugin-format job data for the
 * plugin), then a Worker drains them: raw BullMQ with a no-op processor vs
 * `engine.createWorker` (begin script -> executor -> release script per job).
 * jobs/s from the Worker's start to the last `completed` event.
 */
export async function happyPath(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const rows: Row[] = [];
  const details: Record<string, unknown> = {};
  const rounds = ctx.n(5, 3);
  for (const concurrency of [1, 10, 50]) {
    const jobs = concurrency === 1 ? ctx.n(4000, 600) : ctx.n(15000, 2000);
    const runs = await interleave(rounds, ['raw', 'plugin'] as Variant[], async (variant) => {
      const prefix = benchPrefix(`happy-${variant}`);
      try {
        return await drain(variant, prefix, concurrency, jobs);
      } finally {
        await dropPrefix(redis, prefix);
      }
    });
    const raw = median(runs.raw);
    const plugin = median(runs.plugin);
    const ratio = plugin / raw;
    // issue 12's targets: 0.70 / 0.75 / 0.80 at concurrency 1 / 10 / 50
    const min = concurrency === 1 ? 0.7 : concurrency === 10 ? 0.75 : 0.8;
    log(`happy path c=${concurrency}: raw ${raw.toFixed(0)}/s plugin ${plugin.toFixed(0)}/s ratio ${ratio.toFixed(3)}`);
    details[`concurrency${concurrency}`] = { jobs, rounds, jobsPerSecond: runs, medians: { raw, plugin }, ratio };
    rows.push({
      scenario: 'happy path',
      measure: `jobs/s, concurrency ${concurrency} (plugin ÷ raw BullMQ)`,
      plugin: Math.round(plugin),
      baseline: Math.round(raw),
      ratio,
      target: `≥ ${min.toFixed(2)}`,
      met: ratio >= min,
    });
  }
  return { name: 'happy-path', rows, details };
}

/**
 * Realistic executor: the same drain, but the plugin's executor awaits `IO_MS`
 * (as an HTTP call to the downstream does) before it answers `dispatched`,
 * and raw BullMQ's processor awaits the same `IO_MS`. Concurrency 10 and 50.
 */
export async function happyIo(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const rows: Row[] = [];
  const details: Record<string, unknown> = {};
  const rounds = ctx.n(5, 3);
  for (const concurrency of [10, 50]) {
    const jobs = ctx.n(15000, 2000);
    const runs = await interleave(rounds, ['raw', 'plugin'] as Variant[], async (variant) => {
      const prefix = benchPrefix(`happy-io-${variant}`);
      try {
        return await drain(variant, prefix, concurrency, jobs, IO_MS);
      } finally {
        await dropPrefix(redis, prefix);
      }
    });
    const raw = median(runs.raw);
    const plugin = median(runs.plugin);
    const ratio = plugin / raw;
    log(
      `happy path ${IO_MS} ms c=${concurrency}: raw ${raw.toFixed(0)}/s plugin ${plugin.toFixed(0)}/s ratio ${ratio.toFixed(3)}`,
    );
    details[`concurrency${concurrency}`] = {
      jobs,
      rounds,
      ioMs: IO_MS,
      jobsPerSecond: runs,
      medians: { raw, plugin },
      ratio,
    };
    rows.push({
      scenario: `happy path, executor awaits ${IO_MS} ms`,
      measure: `jobs/s, concurrency ${concurrency} (plugin ÷ raw BullMQ awaiting ${IO_MS} ms too)`,
      plugin: Math.round(plugin),
      baseline: Math.round(raw),
      ratio,
      target: '≥ 0.95',
      met: ratio >= 0.95,
    });
  }
  return { name: 'happy-io', rows, details };
}

/** What the realistic executor (and raw BullMQ's processor) awaits, ms. */
const IO_MS = 2;

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Drains `count` jobs; jobs/s. `ioMs` > 0: the executor / processor awaits that long first. */
export async function drain(
  variant: Variant,
  prefix: string,
  concurrency: number,
  count: number,
  ioMs = 0,
  hooks: { started?(): Promise<void>; finished?(): Promise<void> } = {},
): Promise<number> {
  const queueName = 'q';
  const executor = ioMs > 0 ? async () => (await pause(ioMs), SENT) : async () => SENT;
  const processor = ioMs > 0 ? async (_job: Job) => pause(ioMs) : async (_job: Job) => undefined;
  const e = variant === 'plugin' ? engine(prefix, { executor }) : undefined;
  const queue = e?.queue ?? new Queue(queueName, { connection: bullConnection(), prefix });
  try {
    const payload = { n: 0 };
    const bulk = Array.from({ length: count }, (_, i) => {
      const data: DispatchJobData | { payload: unknown } =
        variant === 'plugin' ? { v: 1, scope: ['book', `s${i}`], stage: 'image', payload } : { payload };
      return { name: 'image', data, opts: { removeOnComplete: true } };
    });
    for (let i = 0; i < bulk.length; i += 1000) await queue.addBulk(bulk.slice(i, i + 1000));

    const worker: Worker =
      e?.createWorker({ concurrency, autorun: false }) ??
      new Worker(queueName, processor, {
        connection: bullConnection(),
        prefix,
        concurrency,
        autorun: false,
      });
    let done = 0;
    let failed = 0;
    const finished = new Promise<void>((resolve) => {
      worker.on('completed', () => {
        if (++done === count) resolve();
      });
      worker.on('failed', () => {
        failed++;
        if (++done === count) resolve();
      });
    });
    await worker.waitUntilReady();
    await hooks.started?.();
    const t0 = process.hrtime.bigint();
    void worker.run();
    await finished;
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    await hooks.finished?.();
    await worker.close();
    if (failed > 0) throw new Error(`${failed} jobs failed in the ${variant} run`);
    return count / seconds;
  } finally {
    if (e) await e.close();
    else await queue.close();
  }
}
