import { Queue, Worker } from 'bullmq';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, bullConnection, client, dropPrefix, RedisCounter, RoundTripCounter } from '../lib/redis';
import { dispatchJob, engine, NO_WORKER, SENT } from '../lib/stages';
import { interleave, log, median } from '../lib/stats';

type Variant = 'raw-complete' | 'plugin-defer' | 'plugin-dispatch';

/**
 * Cost of one deferral beyond a plain job completion. A concurrency-1 Worker
 * drains N queued jobs: raw BullMQ completing no-op jobs vs the plugin's Worker
 * whose executor answers `no_worker_available` (each job becomes a deferral:
 * begin script, then one MULTI with the defer script and the wake-up's add,
 * then the job completes). Round trips are counted with MONITOR (a MULTI..EXEC
 * block is one), commands with INFO commandstats (Lua's inner calls included),
 * writes with Redis' dirty counter. Per job, then plugin - raw. For reference,
 * the same for jobs the plugin dispatches (executor answers `dispatched`).
 */
export async function deferralCost(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const jobs = ctx.n(300, 100);
  const rounds = ctx.n(3, 2);
  const runs = await interleave(
    rounds,
    ['raw-complete', 'plugin-defer', 'plugin-dispatch'] as Variant[],
    async (variant) => {
      const prefix = benchPrefix(`defer-${variant}`);
      try {
        return await drainCounted(variant, prefix, jobs);
      } finally {
        await dropPrefix(redis, prefix);
      }
    },
  );
  const m = (v: Variant, k: 'roundTrips' | 'commands' | 'writes') => median(runs[v].map((r) => r[k]));
  const extraRt = m('plugin-defer', 'roundTrips') - m('raw-complete', 'roundTrips');
  const extraCmd = m('plugin-defer', 'commands') - m('raw-complete', 'commands');
  log(`deferral: +${extraRt.toFixed(2)} round trips, +${extraCmd.toFixed(1)} commands per deferral`);
  const rows: Row[] = [
    {
      scenario: 'deferral',
      measure: 'Redis round trips per job: deferral (plugin) vs plain completion (raw)',
      plugin: m('plugin-defer', 'roundTrips'),
      baseline: m('raw-complete', 'roundTrips'),
      target: '',
      met: null,
    },
    {
      scenario: 'deferral',
      measure: 'round trips per deferral beyond a plain completion',
      plugin: round2(extraRt),
      target: '≤ 2',
      met: extraRt <= 2.05,
    },
    {
      scenario: 'deferral',
      measure: 'requests (round trips) per job the plugin dispatches, happy path (baseline: raw BullMQ per job)',
      plugin: round2(m('plugin-dispatch', 'roundTrips')),
      baseline: round2(m('raw-complete', 'roundTrips')),
      target: '≤ 2.05',
      met: m('plugin-dispatch', 'roundTrips') <= 2.05,
    },
    {
      scenario: 'deferral',
      measure: 'for reference: Redis commands per job the plugin dispatches (Lua inner calls included)',
      plugin: round2(m('plugin-dispatch', 'commands')),
      baseline: round2(m('raw-complete', 'commands')),
      target: '',
      met: null,
    },
    {
      scenario: 'deferral',
      measure: 'Redis commands per job (Lua inner calls included): deferral vs plain completion',
      plugin: round2(m('plugin-defer', 'commands')),
      baseline: round2(m('raw-complete', 'commands')),
      target: '',
      met: null,
    },
  ];
  return { name: 'deferral-cost', rows, details: { jobs, rounds, perJob: runs } };
}

interface PerJob {
  roundTrips: number;
  commands: number;
  writes: number;
  byRoundTrip: Record<string, number>;
  byCommand: Record<string, number>;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

async function drainCounted(variant: Variant, prefix: string, count: number): Promise<PerJob> {
  const redis = client();
  const executor = variant === 'plugin-defer' ? async () => NO_WORKER : async () => SENT;
  const e = variant === 'raw-complete' ? undefined : engine(prefix, { executor });
  const queue = e?.queue ?? new Queue('q', { connection: bullConnection(), prefix });
  const payload = { n: 1 };
  const bulk = Array.from({ length: count }, (_, i) =>
    e ? dispatchJob(i, payload) : { name: 'image', data: { payload }, opts: { removeOnComplete: true } },
  );
  await queue.addBulk(bulk);
  const worker =
    e?.createWorker({ concurrency: 1, autorun: false }) ??
    new Worker('q', async () => undefined, { connection: bullConnection(), prefix, concurrency: 1, autorun: false });
  let done = 0;
  const finished = new Promise<void>((resolve, reject) => {
    worker.on('completed', () => ++done === count && resolve());
    worker.on('failed', (_job, err) => reject(err));
  });
  await worker.waitUntilReady();
  if (e) await e.isStageDeferred({ scope: ['warm'], stage: 'up' }); // load the engine's scripts before counting
  const rt = new RoundTripCounter(redis);
  await rt.start();
  const counter = new RedisCounter(redis);
  await counter.start();
  void worker.run();
  await finished;
  await rt.flush();
  const counts = await counter.stop();
  await rt.stop();
  await worker.close();
  if (e) await e.close();
  else await queue.close();
  const per = (x: number) => x / count;
  const perMap = (o: Record<string, number>) =>
    Object.fromEntries(Object.entries(o).map(([k, v]) => [k, round2(per(v))]));
  return {
    roundTrips: per(rt.roundTrips),
    commands: per(counts.commands),
    writes: per(counts.writes),
    byRoundTrip: perMap(rt.byCommand),
    byCommand: perMap(counts.byCommand),
  };
}
