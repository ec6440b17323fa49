import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import IORedis from 'ioredis';
import { createDispatchEngine, type DispatchEngine } from '../../src/engine';
import { stageId } from '../../src/stage-ref';
import type { StageRef } from '../../src/types';
import { FLEET_ENGINE_OPTIONS, orphanKeys, rng } from './harness';

const CHILD = path.join(__dirname, 'child-worker.ts');
const ROOT = path.join(__dirname, '..', '..');
/** A wake-up may start this many ms before `until` (ms rounding of the delay); earlier is a violation. */
export const EDGE_TOLERANCE_MS = 10;

export interface FleetOptions {
  /** The engine's Redis. */
  redisUrl: string;
  /** Where the children record what they saw (must not be the Redis a test restarts). */
  recUrl: string;
  processes: number;
  concurrency: number;
  stages: number;
  seed: number;
  /** Fraction of stages the parent cancels at random moments. */
  cancelRate: number;
  faultPoint?: string;
  faultRate?: number;
  /** Deliberate kills: process i kills itself at faultPlan[i % len], for len x faultRounds processes. */
  faultPlan?: string[];
  faultRounds?: number;
  checkOverlap?: boolean;
  /** BullMQ lockDuration of the workers, ms (default 1000: fast recovery after a kill). */
  workerLockMs?: number;
  /** Drain deadline, ms. */
  deadlineMs: number;
}

export interface FleetReport {
  stages: number;
  cancelled: number;
  processes: number;
  concurrency: number;
  /** Processes that died (SIGKILL by the parent or at a fault point) and were restarted. */
  restarts: number;
  killsByPoint: Record<string, number>;
  executorCalls: number;
  deferrals: number;
  /** Non-cancelled stages never dispatched. */
  lost: string[];
  /** Redis state and executor log of the first lost stages, for diagnosis. */
  lostDetail: string[];
  /** Stages dispatched more than once, and of those the ones with no attempt open in a killed process. */
  duplicated: string[];
  duplicatedUnexplained: string[];
  /** Of the duplicates, those whose job was redelivered by the stalled check with no kill (lock starved). */
  duplicatedAfterStall: number;
  /** Executor calls inside a recorded window (before `until`). */
  windowViolations: string[];
  /** Two executor calls of one stage at the same time (CHECK_OVERLAP). */
  overlaps: string[];
  /** Most licences / waiting+delayed jobs one stage had at any sample. */
  maxLicencesPerStage: number;
  maxQueuedJobsPerStage: number;
  /** Most licensed wake-up jobs (waiting or delayed) one stage had at any sample (stale ones are no-ops). */
  maxWakeUpsPerStage: number;
  /** Samples of licences and queued jobs that succeeded (a sample during a Redis restart fails and is skipped). */
  samples: number;
  /** Of those, the samples that saw at least one licence: the per-stage maxima were judged on these. */
  samplesWithLicences: number;
  /** Samples where one stage had more than one licence or queued job (first 20). */
  crowded: string[];
  /** Keys left under the prefix after the drain that belong to no stage. */
  orphans: string[];
  /** Calls that started after the stage's cancel had returned. */
  callsAfterCancel: number;
  /** Cancelled stages that were dispatched anyway (their job had started before the cancel). */
  cancelledButDispatched: number;
  drainMs: number;
}

function connOf(url: string) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379) };
}

/** Worker processes that are restarted whenever they die, until `stop()`. */
export class Fleet {
  private readonly children = new Map<number, ChildProcess>();
  private stopping = false;
  /** Bookkeeping writes started on child exit; awaited before the checks. */
  readonly pending: Promise<unknown>[] = [];
  restarts = 0;
  readonly rec: IORedis;

  constructor(
    private readonly opts: FleetOptions,
    readonly prefix: string,
    readonly queueName: string,
    readonly R: string,
  ) {
    this.rec = new IORedis(opts.recUrl, { maxRetriesPerRequest: null });
  }

  async start(): Promise<void> {
    await Promise.all(Array.from({ length: this.opts.processes }, (_, slot) => this.spawn(slot)));
  }

  private spawn(slot: number): Promise<void> {
    const o = this.opts;
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        REDIS_URL: o.redisUrl,
        REC_URL: o.recUrl,
        REC: this.R,
        PREFIX: this.prefix,
        QUEUE: this.queueName,
        SEED: String(o.seed),
        CONCURRENCY: String(o.concurrency),
        FAULT_POINT: o.faultPoint ?? '',
        FAULT_RATE: String(o.faultRate ?? 0),
        FAULT_PLAN: (o.faultPlan ?? []).join(','),
        FAULT_ROUNDS: String(o.faultRounds ?? 1),
        CHECK_OVERLAP: o.checkOverlap ? '1' : '0',
        WORKER_LOCK_MS: String(o.workerLockMs ?? 1000),
      },
    });
    this.children.set(slot, child);
    child.on('exit', () => {
      const open = `${this.R}:open:${child.pid}`;
      // attempts open in a process that died mid-run may be repeated (at least once)
      const record = this.stopping
        ? this.rec.del(open)
        : this.rec.sunionstore(`${this.R}:killed-open`, `${this.R}:killed-open`, open).then(() => this.rec.del(open));
      this.pending.push(record.catch(() => 0));
      if (this.stopping || this.children.get(slot) !== child) return;
      this.restarts += 1;
      void this.spawn(slot);
    });
    return new Promise((resolve) => {
      let buf = '';
      child.stdout!.on('data', (d: Buffer) => {
        buf += d.toString();
        if (buf.includes('ready')) resolve();
      });
      child.on('exit', () => resolve());
    });
  }

  private readonly killed = new WeakSet<ChildProcess>();

  /**
   * SIGKILLs one running child and resolves once it has exited (so its restart
   * is counted before the run can stop); false when none is running.
   */
  async killOne(random: () => number): Promise<boolean> {
    const live = [...this.children.values()].filter(
      (c) => c.exitCode === null && c.signalCode === null && !this.killed.has(c),
    );
    const victim = live[Math.floor(random() * live.length)];
    if (!victim) return false;
    this.killed.add(victim);
    const exited = new Promise<void>((resolve) => victim.once('exit', () => resolve()));
    if (!victim.kill('SIGKILL')) return false;
    await exited;
    return true;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      [...this.children.values()].map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGTERM');
            setTimeout(() => c.kill('SIGKILL'), 10_000).unref();
          }),
      ),
    );
  }

  async dispose(): Promise<void> {
    const keys = await this.rec.keys(`${this.R}:*`);
    for (let i = 0; i < keys.length; i += 500) await this.rec.del(...keys.slice(i, i + 500));
    await this.rec.quit();
  }
}

export function fleetRefs(n: number): StageRef[] {
  const kinds = ['image', 'video', 'audio'];
  return Array.from({ length: n }, (_, i) => ({ scope: [`book-${i % 17}`, `scene-${i}`], stage: kinds[i % 3]! }));
}

/** Retries an operation while the engine's Redis is briefly away (restart tests). */
async function persist<T>(op: () => Promise<T>, deadline: number): Promise<T> {
  for (;;) {
    try {
      return await op();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * Runs a fleet over `opts.stages` stages: enqueue all, cancel some at random
 * moments, run `chaos` meanwhile, wait for the drain, and check everything
 * the children recorded.
 */
export async function runFleet(
  opts: FleetOptions,
  chaos?: (fleet: Fleet, until: Promise<void>) => Promise<void>,
): Promise<FleetReport> {
  const id = randomUUID().slice(0, 8);
  const prefix = `rel-${id}`;
  const queueName = `fleet-${id}`;
  const fleet = new Fleet(opts, prefix, queueName, `rec-${id}`);
  const R = fleet.R;
  const random = rng(opts.seed);
  const engineRedis = new IORedis(opts.redisUrl, { maxRetriesPerRequest: null });
  const engine: DispatchEngine = createDispatchEngine({
    connection: { ...connOf(opts.redisUrl), maxRetriesPerRequest: null },
    prefix,
    queueName,
    executor: async () => {
      throw new Error('the parent never dispatches');
    },
    ...FLEET_ENGINE_OPTIONS,
  });
  engine.queue.on('error', () => undefined);
  const refs = fleetRefs(opts.stages);
  const sids = refs.map(stageId);
  const cancelAt = new Map<string, number>();
  const deadline = Date.now() + opts.deadlineMs;
  let maxLic = 0;
  let maxQueued = 0;
  let maxWakeUps = 0;
  let samples = 0;
  let samplesWithLicences = 0;
  const crowded: string[] = [];
  let done = false;
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  try {
    await fleet.start();
    const base = `${prefix}:${queueName}:`;
    const sampler = (async () => {
      while (!done) {
        try {
          // one MULTI: a consistent snapshot of licences and queued jobs
          const snap = (await engineRedis
            .multi()
            .zrange(`${base}sd:licences`, '0', '-1')
            .zrange(`${base}delayed`, '0', '-1')
            .lrange(`${base}wait`, '0', '-1')
            .exec())!.map(([, v]) => v as string[]);
          const [lic, delayed, waiting] = snap as [string[], string[], string[]];
          const per = (ids: string[]) => {
            const m = new Map<string, Set<string>>();
            for (const x of ids) {
              const sid = x.split('@')[0]!;
              if (!m.has(sid)) m.set(sid, new Set());
              m.get(sid)!.add(x.replace(/!$/, ''));
            }
            let max = 0;
            for (const [sid, set] of m) {
              if (set.size > max) max = set.size;
              if (set.size > 1) crowded.push(`${sid}: ${[...set].join(' ')}`);
            }
            return max;
          };
          maxLic = Math.max(maxLic, per(lic));
          maxQueued = Math.max(maxQueued, per([...delayed, ...waiting]));
          const licensed = new Set(lic.map((l) => l.replace(/!$/, '')));
          maxWakeUps = Math.max(maxWakeUps, per([...delayed, ...waiting].filter((x) => licensed.has(x))));
          samples += 1;
          if (lic.length > 0) samplesWithLicences += 1;
        } catch {
          // Redis restarting
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const chaosRun = chaos ? chaos(fleet, finished) : Promise.resolve();

    const toCancel = new Set(sids.filter(() => random() < opts.cancelRate));
    const cancels: Promise<void>[] = [];
    for (let i = 0; i < refs.length; i += 50) {
      await Promise.all(refs.slice(i, i + 50).map((ref) => persist(() => engine.enqueue(ref, { n: 1 }), deadline)));
      for (const [j, ref] of refs.slice(i, i + 50).entries()) {
        const sid = sids[i + j]!;
        if (!toCancel.has(sid)) continue;
        const delay = Math.floor(random() * 1500);
        cancels.push(
          new Promise<void>((r) => setTimeout(r, delay)).then(async () => {
            await persist(() => engine.cancelActiveDispatch(ref, 'test'), deadline);
            cancelAt.set(sid, Date.now());
          }),
        );
      }
    }
    await Promise.all(cancels);

    const started = Date.now();
    // drained: every stage not cancelled has been dispatched, and nothing is queued or held
    for (;;) {
      try {
        const pending = await pendingStages(fleet.rec, R, sids, cancelAt);
        if (pending === 0) {
          const counts = await engine.queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
          const held = await engineRedis.exists(`${base}sd:licences`);
          if (Object.values(counts).every((c) => c === 0) && held === 0) break;
        }
      } catch {
        // Redis restarting
      }
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const drainMs = Date.now() - started;
    done = true;
    finish();
    await chaosRun;
    await sampler;
    await fleet.stop();
    await Promise.all(fleet.pending);

    const report = await verify(fleet, sids, cancelAt, opts);
    report.orphans = await orphanKeys(engineRedis as never, prefix, queueName);
    report.lostDetail = await describeStages(engineRedis, fleet.rec, base, R, [
      ...report.lost.slice(0, 5),
      ...report.duplicatedUnexplained.slice(0, 3),
    ]);
    report.maxLicencesPerStage = maxLic;
    report.maxQueuedJobsPerStage = maxQueued;
    report.maxWakeUpsPerStage = maxWakeUps;
    report.samples = samples;
    report.samplesWithLicences = samplesWithLicences;
    report.crowded = crowded.slice(0, 20);
    report.drainMs = drainMs;
    report.restarts = fleet.restarts;
    return report;
  } finally {
    done = true;
    finish();
    await fleet.stop();
    await engine.close().catch(() => undefined);
    const keys = await engineRedis.keys(`${prefix}:*`).catch(() => [] as string[]);
    for (let i = 0; i < keys.length; i += 500) await engineRedis.del(...keys.slice(i, i + 500));
    await engineRedis.quit().catch(() => engineRedis.disconnect());
    await fleet.dispose();
  }
}

async function describeStages(
  redis: IORedis,
  rec: IORedis,
  base: string,
  R: string,
  sids: string[],
): Promise<string[]> {
  const out: string[] = [];
  for (const sid of sids) {
    const marker = await redis.get(`${base}sd:deferred:${sid}`);
    const pttl = await redis.pttl(`${base}sd:deferred:${sid}`);
    const lock = await redis.get(`${base}sd:inflight:${sid}`);
    const lic = await redis.zrangebylex(`${base}sd:licences`, `[${sid}@`, `[${sid}@\xff`);
    const jobs: string[] = [];
    for (const key of await redis.keys(`${base}${sid}@*`)) {
      if (key.endsWith(':logs') || key.endsWith(':lock')) continue;
      const id = key.slice(base.length);
      const [state, failed] = await Promise.all([
        redis
          .zscore(`${base}delayed`, id)
          .then(async (d) =>
            d !== null
              ? 'delayed'
              : (await redis.lpos(`${base}wait`, id)) !== null
                ? 'wait'
                : (await redis.lpos(`${base}active`, id)) !== null
                  ? 'active'
                  : 'other',
          ),
        redis.hget(key, 'failedReason'),
      ]);
      jobs.push(`${id}=${state}${failed ? `(${failed})` : ''}`);
    }
    const log = await rec.lrange(`${R}:log:${sid}`, '0', '-1');
    out.push(
      `${sid}: marker=${marker}/${pttl} lock=${lock} licences=${lic.join(',')} jobs=${jobs.join(',')} calls=${log.join(' ')}`,
    );
  }
  return out;
}

async function pendingStages(rec: IORedis, R: string, sids: string[], cancelAt: Map<string, number>): Promise<number> {
  const p = rec.pipeline();
  for (const sid of sids) p.lrange(`${R}:log:${sid}`, '-1', '-1');
  const res = (await p.exec()) ?? [];
  let pending = 0;
  res.forEach(([, last], i) => {
    const sid = sids[i]!;
    const l = (last as string[])[0];
    if (!cancelAt.has(sid) && !(l && l.split('|')[2] === 'dispatched')) pending += 1;
  });
  return pending;
}

async function verify(
  fleet: Fleet,
  sids: string[],
  cancelAt: Map<string, number>,
  opts: FleetOptions,
): Promise<FleetReport> {
  const { rec, R } = fleet;
  const p = rec.pipeline();
  for (const sid of sids) p.lrange(`${R}:log:${sid}`, '0', '-1').lrange(`${R}:win:${sid}`, '0', '-1');
  const res = (await p.exec()) ?? [];
  const killedOpen = new Set(await rec.smembers(`${R}:killed-open`));
  const stalled = new Set(await rec.smembers(`${R}:stalled`));
  const report: FleetReport = {
    stages: sids.length,
    cancelled: cancelAt.size,
    processes: opts.processes,
    concurrency: opts.concurrency,
    restarts: 0,
    killsByPoint: {},
    executorCalls: 0,
    deferrals: 0,
    lost: [],
    lostDetail: [],
    duplicated: [],
    duplicatedUnexplained: [],
    duplicatedAfterStall: 0,
    windowViolations: [],
    overlaps: await rec.lrange(`${R}:violations`, '0', '-1'),
    maxLicencesPerStage: 0,
    maxQueuedJobsPerStage: 0,
    maxWakeUpsPerStage: 0,
    samples: 0,
    samplesWithLicences: 0,
    crowded: [],
    orphans: [],
    callsAfterCancel: 0,
    cancelledButDispatched: 0,
    drainMs: 0,
  };
  for (const point of ['lock-taken', 'executor-answered', 'rolled-back', 'deferral-recorded', 'released']) {
    const k = Number((await rec.get(`${R}:kills:${point}`)) ?? 0);
    if (k > 0) report.killsByPoint[point] = k;
  }
  sids.forEach((sid, i) => {
    const calls = ((res[2 * i]?.[1] as string[]) ?? []).map((l) => {
      const [t, n, outcome] = l.split('|');
      return { t: Number(t), n: Number(n), outcome };
    });
    const wins = ((res[2 * i + 1]?.[1] as string[]) ?? []).map((l) => {
      const [t0, until] = l.split('|');
      return { t0: Number(t0), until: Number(until) };
    });
    report.executorCalls += calls.length;
    report.deferrals += wins.length;
    const dispatched = calls.filter((c) => c.outcome === 'dispatched').length;
    const cancelled = cancelAt.get(sid);
    if (cancelled === undefined && dispatched === 0) report.lost.push(sid);
    if (cancelled !== undefined && dispatched > 0) report.cancelledButDispatched += 1;
    if (dispatched > 1) {
      report.duplicated.push(sid);
      if (!killedOpen.has(sid) && !stalled.has(sid)) report.duplicatedUnexplained.push(sid);
      if (!killedOpen.has(sid) && stalled.has(sid)) report.duplicatedAfterStall += 1;
    }
    if (cancelled !== undefined) report.callsAfterCancel += calls.filter((c) => c.t > cancelled).length;
    for (const w of wins) {
      for (const c of calls) {
        if (cancelled !== undefined && c.t > cancelled) continue;
        if (c.t > w.t0 && c.t < w.until - EDGE_TOLERANCE_MS) {
          report.windowViolations.push(`${sid}: call ${c.n} at ${c.t} inside window ${w.t0}..${w.until}`);
        }
      }
    }
  });
  return report;
}

/** The one-line summary each fleet test prints (quoted in docs/reliability.md). */
/**
 * What every fleet run must keep, whatever was killed: no stage lost, no
 * second dispatch the crashes do not explain, no call inside a window, at most
 * one licence and one wake-up per stage, no keys left behind.
 */
export function expectInvariantsKept(report: FleetReport): void {
  expect(report.lost).toEqual([]);
  expect(report.duplicatedUnexplained).toEqual([]);
  expect(report.windowViolations).toEqual([]);
  expect(report.maxLicencesPerStage).toBeLessThanOrEqual(1);
  expect(report.maxWakeUpsPerStage).toBeLessThanOrEqual(1);
  expectSampled(report);
  expect(report.orphans).toEqual([]);
}

/**
 * The sampler swallows errors (Redis may be restarting), so "at most one
 * licence per stage" would pass if no sample ever succeeded: require enough
 * samples, some of them with licences to judge.
 */
export function expectSampled(report: FleetReport): void {
  expect(report.samples).toBeGreaterThanOrEqual(MIN_SAMPLES);
  expect(report.samplesWithLicences).toBeGreaterThanOrEqual(1);
}

/** Fewest successful samples a fleet run must have taken (one per 100 ms, so half a second of run). */
export const MIN_SAMPLES = 5;

export function summary(name: string, r: FleetReport): string {
  return `[reliability] ${name}: ${JSON.stringify({
    stages: r.stages,
    cancelled: r.cancelled,
    processes: `${r.processes}x${r.concurrency}`,
    restarts: r.restarts,
    kills: r.killsByPoint,
    calls: r.executorCalls,
    deferrals: r.deferrals,
    lost: r.lost.length,
    duplicated: r.duplicated.length,
    duplicatedUnexplained: r.duplicatedUnexplained.length,
    duplicatedAfterStall: r.duplicatedAfterStall,
    windowViolations: r.windowViolations.length,
    overlaps: r.overlaps.length,
    maxLicencesPerStage: r.maxLicencesPerStage,
    maxQueuedJobsPerStage: r.maxQueuedJobsPerStage,
    maxWakeUpsPerStage: r.maxWakeUpsPerStage,
    samples: r.samples,
    samplesWithLicences: r.samplesWithLicences,
    orphans: r.orphans.length,
    callsAfterCancel: r.callsAfterCancel,
    cancelledButDispatched: r.cancelledButDispatched,
    drainMs: r.drainMs,
  })}${r.lostDetail.length > 0 ? `\n  lost/duplicated: ${r.lostDetail.join('\n  lost/duplicated: ')}` : ''}${r.crowded.length > 0 ? `\n  crowded samples: ${r.crowded.slice(0, 5).join('; ')}` : ''}`;
}
