import { Queue, Worker, type Job } from 'bullmq';
import type { DispatchJobData } from '../../src';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, bullConnection, client, dropPrefix } from '../lib/redis';
import { engine, SENT } from '../lib/stages';
import { interleave, log, median } from '../lib/stats';

type Variant = 'raw' | 'plugin';

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
    const min = concurrency === 1 ? 0.8 : 0.9;
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

async function drain(variant: Variant, prefix: string, concurrency: number, count: number): Promise<number> {
  const queueName = 'q';
  const e = variant === 'plugin' ? engine(prefix, { executor: async () => SENT }) : undefined;
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
      new Worker(queueName, async (_job: Job) => undefined, {
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
    const t0 = process.hrtime.bigint();
    void worker.run();
    await finished;
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    await worker.close();
    if (failed > 0) throw new Error(`${failed} jobs failed in the ${variant} run`);
    return count / seconds;
  } finally {
    if (e) await e.close();
    else await queue.close();
  }
}
