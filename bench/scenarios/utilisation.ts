import type { DispatchEngine, DispatchEngineOptions, StageRef } from '../../src';
import { HostModel, NaiveScheduler } from '../naive-scheduler';
import { seeded, SlotFarm, stageKey, type FarmFigures } from '../lib/farm';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, client, dropPrefix, RedisCounter } from '../lib/redis';
import { engine, refs } from '../lib/stages';
import { fmt, interleave, log, median, pool } from '../lib/stats';

type Variant = 'signals' | 'fixed' | 'naive';

interface Run extends FarmFigures {
  executorCalls: number;
  commands: number;
  writes: number;
  wakeCalls: number;
  /** Stages those calls woke (the rest of the deferred stages woke when their window ran out). */
  wokenBySignal: number;
}

const SLOTS = 4;
const SEED = 11;
const MIN_MS = 300;
const MAX_MS = 900;
/** The naive scheduler's tick: a 5 s scheduler with 5 s jobs, time scaled by 1/10 (jobs 300–900 ms). */
const TICK_MS = 500;

/**
 * Utilisation (issue 11): SLOTS render slots, N stages with render lengths
 * 300–900 ms drawn from one seed (the same workload in every run), all
 * submitted at once. The same host code (HostModel: lease, metadata, state,
 * rollback, journal) wraps the farm in every variant:
 *   signals  the plugin, each stage enqueued once; windows 10 s doubling to
 *            60 s; the farm calls `engine.wakeDeferred({ limit: 1 })` each
 *            time a slot frees.
 *   fixed    the plugin, enqueued once, a fixed 1 s window, no signal.
 *   naive    every 500 ms, every stage not yet sent gets an attempt, rolled
 *            back and journalled when no slot was free (a 5 s tick with 5 s
 *            jobs, scaled by 1/10).
 * Slot idle while work waits: free slots integrated over the time at least
 * one stage was not sent yet, on every send and every render end. Redis
 * commands and writes: CONFIG RESETSTAT before each run, counted until the
 * last render ends (the Worker's own polling included).
 */
export async function utilisation(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const stages = refs('book', ctx.n(60, 24));
  const rnd = seeded(SEED);
  const lengths = new Map(stages.map((ref) => [stageKey(ref), MIN_MS + Math.floor(rnd() * (MAX_MS - MIN_MS))]));
  const runs = await interleave(ctx.n(3, 1), ['signals', 'fixed', 'naive'] as Variant[], async (variant) => {
    const prefix = benchPrefix(`util-${variant}`);
    try {
      const r = await run(variant, prefix, stages, lengths);
      log(
        `utilisation ${variant}: idle ${fmt(r.idleWhileWaitingMs)} ms (${fmt(100 * r.idleShare, 1)} %; ${fmt(r.idleAtStartMs)} ms before every slot was first busy; a freed slot stayed empty ${fmt(r.refillMeanMs)} ms on average, p90 ${fmt(r.refillP90Ms)} ms), drain ${fmt(r.drainMs)} ms, executor ${r.executorCalls} (${r.wokenBySignal} stages woken by ${r.wakeCalls} signals), commands ${r.commands}`,
      );
      return r;
    } finally {
      await dropPrefix(redis, prefix);
    }
  });
  const m = (v: Variant, k: keyof Run) => median(runs[v].map((r) => r[k]));
  const n = stages.length;
  const idle = (v: Variant) => `${fmt(m(v, 'idleWhileWaitingMs'))} (${fmt(100 * m(v, 'idleShare'), 1)} %)`;
  const label = { signals: 'signals', fixed: 'fixed 1 s window, no signal' } as const;
  const rows: Row[] = [];
  for (const v of ['signals', 'fixed'] as const) {
    const scenario = `utilisation (${label[v]} vs naive 500 ms tick)`;
    const idleRatio = m(v, 'idleWhileWaitingMs') / m('naive', 'idleWhileWaitingMs');
    rows.push(
      {
        scenario,
        measure: `slot idle while work waits, ms over ${SLOTS} slots (% of slot time), ${n} stages`,
        plugin: idle(v),
        baseline: idle('naive'),
        ratio: idleRatio,
        target: v === 'signals' ? '≤ naive' : '',
        met: v === 'signals' ? idleRatio <= 1 : null,
      },
      {
        scenario,
        measure: `time to drain, ms (plugin ÷ naive)`,
        plugin: Math.round(m(v, 'drainMs')),
        baseline: Math.round(m('naive', 'drainMs')),
        ratio: m(v, 'drainMs') / m('naive', 'drainMs'),
        target: '',
        met: null,
      },
      {
        scenario,
        measure: `executor calls, ${n} stages`,
        plugin: m(v, 'executorCalls'),
        baseline: m('naive', 'executorCalls'),
        target: v === 'signals' ? `≤ 2 × N = ${2 * n}` : '',
        met: v === 'signals' ? m(v, 'executorCalls') <= 2 * n : null,
      },
      {
        scenario,
        measure: `Redis commands / writes until drained`,
        plugin: `${fmt(m(v, 'commands'))} / ${fmt(m(v, 'writes'))}`,
        baseline: `${fmt(m('naive', 'commands'))} / ${fmt(m('naive', 'writes'))}`,
        ratio: m(v, 'commands') / m('naive', 'commands'),
        target: '',
        met: null,
      },
    );
  }
  return {
    name: 'utilisation',
    rows,
    details: { slots: SLOTS, stages: n, seed: SEED, lengthsMs: [MIN_MS, MAX_MS], naiveTickMs: TICK_MS, runs },
  };
}

async function run(
  variant: Variant,
  prefix: string,
  stages: readonly StageRef[],
  lengths: ReadonlyMap<string, number>,
): Promise<Run> {
  const redis = client();
  let e: DispatchEngine | undefined;
  let wakeCalls = 0;
  let wokenBySignal = 0;
  const farm = new SlotFarm(SLOTS, lengths, () => {
    if (variant !== 'signals' || !e) return;
    wakeCalls++;
    e.wakeDeferred({ limit: 1 }).then(
      (r) => (wokenBySignal += r.woken.length),
      (err: unknown) => log(`wakeDeferred failed: ${String(err)}`),
    );
  });
  const host = new HostModel(redis, prefix, farm.offer);
  let ticker: Promise<void> | undefined;
  let stop = false;
  if (variant !== 'naive') {
    let a = 0;
    const windows: DispatchEngineOptions['windows'] =
      variant === 'signals' ? { capacitySeconds: 10, capacityMaxSeconds: 60 } : { capacitySeconds: 1 };
    e = engine(prefix, {
      executor: (ref) => host.attempt(ref, `a${++a}`),
      rollback: (ref) => host.rollback(ref),
      journal: (ref, ev) => host.journal(ref, ev.type, ev.reason),
      windows,
    });
    await e.waitUntilReady(); // connect and load scripts before counting
    await e.createWorker({ concurrency: 8 }).waitUntilReady();
  }
  await redis.ping();
  const counter = new RedisCounter(redis);
  await counter.start();
  farm.start();
  if (e) {
    const eng = e;
    await pool(stages, 16, async (ref) => {
      const r = await eng.enqueue(ref, { n: 1 });
      if (!r.added) throw new Error(`expected a new job, got ${JSON.stringify(r)}`);
    });
  } else {
    const naive = new NaiveScheduler(host);
    ticker = (async () => {
      for (let next = Date.now(); !stop; next += TICK_MS) {
        for (const ref of stages) if (!farm.isSent(ref)) await naive.tryDispatch(ref);
        await new Promise((r) => setTimeout(r, Math.max(0, next + TICK_MS - Date.now())));
      }
    })();
  }
  const timeout = setTimeout(() => log(`utilisation ${variant}: not drained after 5 minutes`), 300_000);
  await farm.drained;
  clearTimeout(timeout);
  const c = await counter.stop();
  stop = true;
  await ticker;
  await e?.close();
  return {
    ...farm.figures(),
    executorCalls: host.executorCalls,
    commands: c.commands,
    writes: c.writes,
    wakeCalls,
    wokenBySignal,
  };
}
