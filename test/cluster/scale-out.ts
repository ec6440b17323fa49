import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Cluster } from 'ioredis';
import { createDispatchEngine, stageId, type DispatchEngine } from '../../src';
import { client, dropPrefix, redisOptions, waitFor } from '../helpers/redis';
import type { RedisClusterHarness } from './harness';
import type { StagePayload, WorkerEvent, WorkerProcessConfig } from './worker-process';

/**
 * Runs a workload of stages over several queues on the cluster, worked by
 * child processes, and checks what every stage went through from the calls
 * and deferrals the processes report.
 */

export interface Workload {
  stages: number;
  processes: number;
  concurrency: number;
  queues: { prefix: string; queueName: string }[];
  /** Each stage answers capacity to its first 0..maxCapacityCalls calls (at random), then dispatches. */
  maxCapacityCalls: number;
  capacitySeconds: number;
  jitter: number;
  lockMs: number;
  /**
   * Every `every`th stage needs `resource` (C31's gates): its capacity answers close the gate of
   * the resource in its queue, its dispatches at a closed gate defer with no executor call, and
   * its successes wake the line.
   */
  gated?: { every: number; resource: string };
  /** Runs while the workload runs (e.g. kills a master); its result lands in `Report.during`. */
  during?: (progress: () => { sent: number; calls: number }) => Promise<unknown>;
  timeoutMs: number;
}

export interface Report {
  stages: number;
  processes: number;
  calls: number;
  /** Every deferral: capacity answers' and gated ones. */
  deferrals: number;
  /** Deferrals made at a closed gate (reason `gate_closed`), with no executor call. */
  gatedDeferrals: number;
  /** Deferrals ended early by a success that woke its resource's line (`woken` events with `early`). */
  wokenEarly: number;
  /** Stages never dispatched. */
  lost: string[];
  /** Stages dispatched more than once. */
  duplicated: string[];
  /** Calls of a stage that started while another call of it was running. */
  overlaps: string[];
  /** Calls of a stage that started while a deferral of it, recorded before, was still open. */
  insideWindow: string[];
  /** Capacity answers the stages were scripted to give, in all. */
  scriptedCapacity: number;
  /** Capacity answers that did not become exactly one (not gated) deferral (a retry after an error). */
  unrecordedDeferrals: number;
  /** How the stages that were duplicated went, for a failure message. */
  details: string[];
  /** Executor calls per worker process. */
  callsPerProcess: number[];
  /** `replicaLag` events: writes the replicas did not acknowledge in time (after a failover: no replica). */
  replicaLags: number;
  errors: string[];
  during: unknown;
  ms: number;
}

type Call = Extract<WorkerEvent, { type: 'call' }>;
type Deferral = Extract<WorkerEvent, { type: 'deferred' }> & { at: number };

/** A wake-up job is due at (construction time + window) >= `until`; allow for timer granularity. */
const WINDOW_TOLERANCE_MS = 20;

export async function runWorkload(harness: RedisClusterHarness, cluster: Cluster, w: Workload): Promise<Report> {
  const children: ChildProcess[] = [];
  const calls: Call[] = [];
  const deferrals: Deferral[] = [];
  const errors: string[] = [];
  /** When a success woke each wake-up early from its line (the wake-up's id, the earliest report). */
  const wokenAt = new Map<string, number>();
  let replicaLags = 0;
  const engines: DispatchEngine<StagePayload>[] = w.queues.map((q) =>
    // by hand, not harness(): engines on the private cluster, in the parent of the worker processes
    createDispatchEngine<StagePayload, string>({
      connection: cluster,
      prefix: q.prefix,
      queueName: q.queueName,
      executor: async () => ({ dispatched: false, jobs: 0, reason: 'unused' }),
    }),
  );
  const started = Date.now();
  const counterRedis = client();
  let counterCleanup = async () => undefined as unknown;
  try {
    const counterPrefix = `sd-cluster-counter-${randomUUID().slice(0, 8)}`;
    counterCleanup = () => dropPrefix(counterRedis, counterPrefix);
    const config: WorkerProcessConfig = {
      counter: { ...pick(redisOptions()), prefix: counterPrefix },
      startupNodes: harness.startupNodes,
      queues: w.queues,
      concurrency: w.concurrency,
      capacitySeconds: w.capacitySeconds,
      jitter: w.jitter,
      lockMs: w.lockMs,
      // the control experiment of docs/scaling.md: `SD_WAIT_FOR_REPLICAS=off npm run test:cluster:soak`
      waitForReplicas: process.env.SD_WAIT_FOR_REPLICAS !== 'off',
    };
    let ready = 0;
    for (let i = 0; i < w.processes; i++) {
      const child = fork(resolve(__dirname, 'worker-process.ts'), [JSON.stringify(config)], {
        execArgv: ['--import', 'tsx'],
        cwd: resolve(__dirname, '../..'),
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      child.on('message', (e: WorkerEvent) => {
        if (e.type === 'ready') ready++;
        else if (e.type === 'call') calls.push(e);
        else if (e.type === 'deferred') deferrals.push({ ...e, at: Date.now() });
        else if (e.type === 'woken') wokenAt.set(e.jobId, Math.min(wokenAt.get(e.jobId) ?? Infinity, e.at));
        else if (e.type === 'lag') replicaLags++;
        else errors.push(e.message);
      });
      children.push(child);
    }
    await waitFor(() => ready === w.processes, `${w.processes} worker processes to be ready`, 60_000);

    // stages spread round-robin over the queues, each with its own number of capacity answers
    let scriptedCapacity = 0;
    const stages: {
      engine: DispatchEngine<StagePayload>;
      queue: string;
      scope: string[];
      stage: string;
      resource?: string;
    }[] = [];
    for (let i = 0; i < w.stages; i++) {
      const q = w.queues[i % w.queues.length]!;
      stages.push({
        engine: engines[i % engines.length]!,
        queue: `${q.prefix}:${q.queueName}`,
        scope: [`book-${i % 7}`, `ch-${i}`],
        stage: i % 2 ? 'image' : 'video',
        ...(w.gated && i % w.gated.every === 0 ? { resource: w.gated.resource } : {}),
      });
    }
    await Promise.all(
      stages.map(async (s) => {
        const capacityCalls = Math.floor(Math.random() * (w.maxCapacityCalls + 1));
        scriptedCapacity += capacityCalls;
        const payload = { capacityCalls, ...(s.resource ? { resource: s.resource } : {}) };
        const r = await s.engine.enqueue({ scope: s.scope, stage: s.stage }, payload);
        if (!r.added) throw new Error(`stage ${s.scope.join('/')}/${s.stage} was not enqueued: ${r.reason}`);
      }),
    );
    const keys = stages.map((s) => `${s.queue}|${s.scope.join('/')}/${s.stage}`);
    const sentKeys = () => new Set(calls.filter((c) => c.sent).map((c) => `${c.queue}|${c.key}`));

    const during = w.during ? await w.during(() => ({ sent: sentKeys().size, calls: calls.length })) : undefined;

    // done: every stage sent, and no job left waiting, delayed or active in any queue
    await waitFor(
      async () => {
        if (sentKeys().size < keys.length) return false;
        for (const e of engines) {
          const c = await e.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
          if (Object.values(c).some((n) => n > 0)) return false;
        }
        return true;
      },
      'every stage to be dispatched',
      w.timeoutMs,
    ).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${await diagnose(cluster, engines, keys, sentKeys(), calls, errors)}`);
    });

    const report = check(keys, calls, deferrals, wokenAt);
    const callsPerProcess = children.map((c) => calls.filter((e) => e.pid === c.pid).length);
    return {
      ...report,
      scriptedCapacity,
      callsPerProcess,
      stages: w.stages,
      processes: w.processes,
      replicaLags,
      errors,
      during,
      ms: Date.now() - started,
    };
  } finally {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((done) => {
            if (c.exitCode !== null || c.signalCode !== null) return done();
            const timer = setTimeout(() => c.kill('SIGKILL'), 10_000);
            c.once('exit', () => {
              clearTimeout(timer);
              done();
            });
            c.send({ type: 'stop' });
          }),
      ),
    );
    await Promise.all(engines.map((e) => e.close()));
    await counterCleanup();
    await counterRedis.quit();
  }
}

function pick(o: { host?: string; port?: number; password?: string }) {
  return { host: o.host ?? '127.0.0.1', port: o.port ?? 6379, ...(o.password ? { password: o.password } : {}) };
}

/** What is left of the stages that were not dispatched, for a failure message. */
async function diagnose(
  cluster: Cluster,
  engines: DispatchEngine<StagePayload>[],
  keys: string[],
  sent: Set<string>,
  calls: Call[],
  errors: string[],
): Promise<string> {
  const lines: string[] = [];
  for (const e of engines) {
    const name = `${e.queue.opts.prefix}:${e.queue.name}`;
    const missing = keys.filter((k) => k.startsWith(`${name}|`) && !sent.has(k));
    const counts = await e.queue.getJobCounts().catch((x: Error) => x.message);
    const deferred = await e.listDeferred().then(
      (d) => d.length,
      (x: Error) => x.message,
    );
    lines.push(`${name}: missing ${missing.length}, counts ${JSON.stringify(counts)}, deferred ${deferred}`);
    for (const k of missing.slice(0, 3)) {
      const path = k.slice(name.length + 1).split('/');
      const sid = stageId({ scope: path.slice(0, -1), stage: path[path.length - 1]! });
      const licences = await cluster.zrangebylex(`${name}:sd:licences`, `[${sid}@`, `[${sid}@\xff`);
      const jobs = await Promise.all(licences.map((l) => cluster.exists(`${name}:${l.replace(/!$/, '')}`)));
      const seen = calls.filter((c) => `${c.queue}|${c.key}` === k).map((c) => (c.sent ? 'sent' : 'capacity'));
      lines.push(
        `  ${k}: calls [${seen.join(',')}], licences ${JSON.stringify(licences)}, job exists ${JSON.stringify(jobs)}`,
      );
    }
  }
  const last = calls.reduce((m, c) => Math.max(m, c.end), 0);
  lines.push(
    `last executor call ${Date.now() - last} ms ago; ${errors.length} worker errors, last: ${errors.slice(-3).join(' | ')}`,
  );
  return lines.join('\n');
}

function check(keys: string[], calls: Call[], deferrals: Deferral[], wokenAt: Map<string, number>) {
  const byStage = new Map<string, { calls: Call[]; deferrals: Deferral[] }>(
    keys.map((k) => [k, { calls: [], deferrals: [] }]),
  );
  for (const c of calls) byStage.get(`${c.queue}|${c.key}`)?.calls.push(c);
  for (const d of deferrals) byStage.get(`${d.queue}|${d.key}`)?.deferrals.push(d);
  const lost: string[] = [];
  const duplicated: string[] = [];
  const overlaps: string[] = [];
  const insideWindow: string[] = [];
  let unrecordedDeferrals = 0;
  const details: string[] = [];
  for (const [key, s] of byStage) {
    const cs = [...s.calls].sort((a, b) => a.start - b.start);
    const sent = cs.filter((c) => c.sent).length;
    if (sent === 0) lost.push(key);
    if (sent > 1) {
      duplicated.push(key);
      details.push(
        `${key}: ${cs.map((c) => `${c.sent ? 'sent' : 'cap'}@${c.start}[${c.pid}]`).join(' ')}; deferrals until ${s.deferrals.map((d) => d.until).join(',')}`,
      );
    }
    for (let i = 1; i < cs.length; i++) if (cs[i]!.start < cs[i - 1]!.end) overlaps.push(`${key} @${cs[i]!.start}`);
    for (const d of s.deferrals) {
      // the capacity answer this deferral came from: the last one that ended before it was reported
      // (a gated deferral's: the one before it, if any; no call comes between the two)
      const from = cs.filter((c) => !c.sent && c.end <= d.at).pop();
      const after = from?.end ?? 0;
      // a success that woke this window from its line ended it: calls from then on are the wake's
      const woken = wokenAt.get(d.wakeUpJobId) ?? Infinity;
      for (const c of cs) {
        if (c.start > after && c.start < d.until - WINDOW_TOLERANCE_MS && c.start < woken)
          insideWindow.push(`${key} ran ${d.until - c.start} ms early`);
      }
    }
    // a gated deferral has no executor call: only the others come from capacity answers
    const answered = s.deferrals.filter((d) => d.reason !== 'gate_closed').length;
    unrecordedDeferrals += Math.abs(cs.filter((c) => !c.sent).length - answered);
  }
  return {
    calls: calls.length,
    deferrals: deferrals.length,
    gatedDeferrals: deferrals.filter((d) => d.reason === 'gate_closed').length,
    wokenEarly: wokenAt.size,
    lost,
    duplicated,
    overlaps,
    insideWindow,
    unrecordedDeferrals,
    details,
  };
}

/** Writes the figures of a run to test/artifacts/ (git-ignored) for docs/scaling.md. */
export function saveFigures(name: string, report: Report, extra: Record<string, unknown>): void {
  const { errors, ...rest } = report;
  const figures = { ...extra, ...rest, errorCount: errors.length, errorSample: errors.slice(0, 5) };
  const dir = resolve(__dirname, '../artifacts');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(figures, null, 2)}\n`);
}
