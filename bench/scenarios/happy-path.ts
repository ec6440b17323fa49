import { Queue, Worker, type Job } from 'bullmq';
import { DeferralStore } from '../../src/deferral-store';
import { beginOp, readBegin, type BeginRequest } from '../../src/store/begin';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import IORedis from 'ioredis';
import { benchPrefix, bullConnection, client, dropPrefix, redisOptions } from '../lib/redis';
import { dispatchJob, engine, SENT } from '../lib/stages';
import { interleave, log, median } from '../lib/stats';

/**
 * `eval`, the floor the targets are set against: raw BullMQ whose processor
 * awaits one no-op `EVAL` per job on a client of its own: what any design
 * that adds one request per job pays at the least. `floor`: the same request
 * batched per event-loop turn as the plugin batches its begins (`Floor`).
 * `nobegin` (no target): the plugin whose begin a stub answers at once
 * (`stubBegin`): its attempt's JavaScript, its release, and BullMQ carrying
 * its job data and return value, without its begin's request.
 */
export type Variant = 'raw' | 'eval' | 'floor' | 'plugin' | 'nobegin';

const VARIANTS: readonly Variant[] = ['raw', 'eval', 'floor', 'plugin', 'nobegin'];
const IO_VARIANTS: readonly Variant[] = ['raw', 'eval', 'floor', 'plugin'];
/** The targets: the plugin ÷ the `eval` floor, no-op executor (by concurrency) and a 2 ms one. */
const TARGET = 0.9;
const IO_TARGET = 0.95;

/** `BATCH`'s record of a lock taken (see `locked` in src/store/begin.ts): fence 1, tied to the job, no licence, record or gate. */
const PLAIN_LOCK = '1,0,0,0:0,1,0,0,';

/** Makes every begin answer at once (no request): a lock taken, tied to the job, nothing else on the stage. */
export function stubBegin(): () => void {
  const real = DeferralStore.prototype.begin;
  const read = readBegin(
    PLAIN_LOCK,
    beginOp({ sid: 's', ownJobId: 'j', lockMs: 1, wakeUp: false, skewToleranceMs: 0, bullToken: 't' }),
  );
  // a record that no longer reads as a plain lock would send every job round a loop of delays: refuse it
  if (read.kind !== 'locked' || !read.heldNothing || read.gatedMs !== undefined || !read.token.endsWith('\nt'))
    throw new Error(`the nobegin stub's record no longer reads as a plain lock: ${JSON.stringify(read)}`);
  DeferralStore.prototype.begin = function (req: BeginRequest) {
    return Promise.resolve(readBegin(PLAIN_LOCK, beginOp(req)));
  };
  return () => {
    DeferralStore.prototype.begin = real;
  };
}

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
    const runs = await interleave(rounds, VARIANTS, async (variant) => {
      const prefix = benchPrefix(`happy-${variant}`);
      try {
        return await drain(variant, prefix, concurrency, jobs);
      } finally {
        await dropPrefix(redis, prefix);
      }
    });
    const raw = median(runs.raw);
    const evalFloor = median(runs.eval);
    const floor = median(runs.floor);
    const plugin = median(runs.plugin);
    const nobegin = median(runs.nobegin);
    const ratio = plugin / raw;
    log(
      `happy path c=${concurrency}: raw ${raw.toFixed(0)}/s floor ${floor.toFixed(0)}/s plugin ${plugin.toFixed(0)}/s ratio ${ratio.toFixed(3)}`,
    );
    details[`concurrency${concurrency}`] = {
      jobs,
      rounds,
      jobsPerSecond: runs,
      medians: { raw, eval: evalFloor, floor, plugin, nobegin },
      ratio,
    };
    rows.push(...floorRows('happy path', concurrency, { raw, evalFloor, floor, plugin }, TARGET));
    rows.push({
      scenario: 'happy path',
      measure:
        `the plugin without its begin's request, concurrency ${concurrency}: a stub answers each begin at once ` +
        `(the attempt's JavaScript, its release, BullMQ carrying its job data and return value) ÷ raw BullMQ ` +
        `(the plugin ÷ this: ${(plugin / nobegin).toFixed(2)})`,
      plugin: Math.round(nobegin),
      baseline: Math.round(raw),
      ratio: nobegin / raw,
      target: '(no target: a reference)',
      met: null,
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
    const runs = await interleave(rounds, IO_VARIANTS, async (variant) => {
      const prefix = benchPrefix(`happy-io-${variant}`);
      try {
        return await drain(variant, prefix, concurrency, jobs, IO_MS);
      } finally {
        await dropPrefix(redis, prefix);
      }
    });
    const raw = median(runs.raw);
    const evalFloor = median(runs.eval);
    const floor = median(runs.floor);
    const plugin = median(runs.plugin);
    const ratio = plugin / raw;
    log(
      `happy path ${IO_MS} ms c=${concurrency}: raw ${raw.toFixed(0)}/s floor ${floor.toFixed(0)}/s plugin ${plugin.toFixed(0)}/s ratio ${ratio.toFixed(3)}`,
    );
    details[`concurrency${concurrency}`] = {
      jobs,
      rounds,
      ioMs: IO_MS,
      jobsPerSecond: runs,
      medians: { raw, eval: evalFloor, floor, plugin },
      ratio,
    };
    rows.push(
      ...floorRows(
        `happy path, executor awaits ${IO_MS} ms`,
        concurrency,
        { raw, evalFloor, floor, plugin },
        IO_TARGET,
      ),
    );
  }
  return { name: 'happy-io', rows, details };
}

/** The target row (the plugin ÷ the `eval` floor), then the floors and the plugin against raw BullMQ. */
function floorRows(
  scenario: string,
  concurrency: number,
  m: { raw: number; evalFloor: number; floor: number; plugin: number },
  target: number,
): Row[] {
  const at = `concurrency ${concurrency}`;
  const vsRaw = (measure: string, jobsPerSecond: number): Row => ({
    scenario,
    measure: `${measure}, ${at}: jobs/s ÷ raw BullMQ's`,
    plugin: Math.round(jobsPerSecond),
    baseline: Math.round(m.raw),
    ratio: jobsPerSecond / m.raw,
    target: '(no target: a reference)',
    met: null,
  });
  return [
    {
      scenario,
      measure: `jobs/s, ${at}: the plugin ÷ the floor (raw BullMQ awaiting one no-op EVAL per job on a client of its own)`,
      plugin: Math.round(m.plugin),
      baseline: Math.round(m.evalFloor),
      ratio: m.plugin / m.evalFloor,
      target: `≥ ${target.toFixed(2)}`,
      met: m.plugin / m.evalFloor >= target,
    },
    vsRaw('the floor', m.evalFloor),
    vsRaw(
      `the batched floor (one no-op script call per event-loop turn; the plugin ÷ it: ${(m.plugin / m.floor).toFixed(2)})`,
      m.floor,
    ),
    vsRaw('the plugin', m.plugin),
  ];
}

/**
 * The `floor` variant's request: the job ids asked in one turn of the event
 * loop go to Redis as one call of a script that does nothing, the way the
 * plugin's `BATCH` carries its begins (its own connection, flushed by
 * `setImmediate`). No Redis work, no plugin code: only the request.
 */
class Floor {
  private queued: { id: string; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private flushing: NodeJS.Immediate | undefined;
  readonly redis = new IORedis(redisOptions());

  constructor() {
    this.redis.defineCommand('floorBatch', { numberOfKeys: 0, lua: 'return #ARGV' });
  }

  ask(id: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queued.push({ id, resolve, reject });
      this.flushing ??= setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const ops = this.queued;
    this.queued = [];
    this.flushing = undefined;
    try {
      const n = await (this.redis as unknown as { floorBatch(...ids: string[]): Promise<number> }).floorBatch(
        ...ops.map((o) => o.id),
      );
      if (n !== ops.length) throw new Error(`floor script answered ${n} for ${ops.length} ids`);
      for (const o of ops) o.resolve();
    } catch (error) {
      for (const o of ops) o.reject(error);
    }
  }
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
  const floor = variant === 'floor' ? new Floor() : undefined;
  const own = variant === 'eval' ? new IORedis(redisOptions()) : undefined;
  const ask = floor
    ? (job: Job) => floor.ask(job.id!)
    : own
      ? async (job: Job) => void (await own.eval('return 1', 0, job.id!))
      : async (_job: Job) => undefined;
  const processor = ioMs > 0 ? async (job: Job) => (await ask(job), pause(ioMs)) : async (job: Job) => ask(job);
  const plugin = variant === 'plugin' || variant === 'nobegin';
  const e = plugin ? engine(prefix, { executor }) : undefined;
  const unstub = variant === 'nobegin' ? stubBegin() : undefined;
  const queue = e?.queue ?? new Queue(queueName, { connection: bullConnection(), prefix });
  try {
    const payload = { n: 0 };
    const bulk = Array.from({ length: count }, (_, i) =>
      plugin ? dispatchJob(i, payload) : { name: 'image', data: { payload }, opts: { removeOnComplete: true } },
    );
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
    unstub?.();
    if (e) await e.close();
    else await queue.close();
    await floor?.redis.quit();
    await own?.quit();
  }
}
