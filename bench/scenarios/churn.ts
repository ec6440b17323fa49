import type { DispatchEngine, StageRef } from '../../src';
import { HostModel, NaiveScheduler } from '../naive-scheduler';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, client, dropPrefix, RedisCounter } from '../lib/redis';
import { engine, refs } from '../lib/stages';
import { interleave, log, median, pool } from '../lib/stats';

type Variant = 'naive' | 'plugin' | 'plugin-until';

interface Counts {
  executorCalls: number;
  journalEvents: number;
  commands: number;
  writes: number;
  seconds: number;
}

/**
 * Churn: 1,000 stages blocked (no worker live) for 12 scheduler ticks, back to
 * back (the window, 600 s, outlasts them all, as a 30 s window outlasts 6
 * ticks of 5 s). The same host code (HostModel) does the lease, metadata,
 * state and journal writes in every variant:
 *   naive         every tick: attempt -> rollback -> journal `dispatch_cancelled`.
 *   plugin        every tick: engine.dispatchStage; the engine's executor is the
 *                 host's attempt, its rollback the host's rollback, its journal
 *                 the host's journal (`stage_deferred`, once per deferral).
 *   plugin-until  as plugin, but the scheduler skips a stage until the `until`
 *                 its last dispatchStage returned (the wake-up job re-dispatches
 *                 it then).
 * Redis commands are INFO commandstats totals (Lua inner calls included).
 */
export async function churn(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const stages = refs('book', ctx.n(1000, 300));
  const ticks = 12;
  const runs = await interleave(ctx.n(2, 1), ['naive', 'plugin', 'plugin-until'] as Variant[], async (variant) => {
    const prefix = benchPrefix(`churn-${variant}`);
    try {
      return await run(variant, prefix, stages, ticks);
    } finally {
      await dropPrefix(redis, prefix);
    }
  });
  const m = (v: Variant, k: keyof Counts) => median(runs[v].map((r) => r[k]));
  const rows: Row[] = [];
  for (const v of ['plugin', 'plugin-until'] as const) {
    for (const [k, label] of [
      ['executorCalls', 'executor calls'],
      ['journalEvents', 'journal events'],
      ['commands', 'Redis commands'],
      ['writes', 'Redis writes'],
    ] as const) {
      const ratio = m('naive', k) / m(v, k);
      rows.push({
        scenario: `churn vs naive (${v === 'plugin' ? 'dispatchStage every tick' : 'scheduler honours `until`'})`,
        measure: `${label}, ${stages.length} stages × ${ticks} ticks (naive ÷ plugin)`,
        plugin: m(v, k),
        baseline: m('naive', k),
        ratio,
        target: k === 'writes' ? '' : '≥ 10',
        met: k === 'writes' ? null : ratio >= 10,
      });
    }
  }
  log(`churn: ${JSON.stringify(Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, v[0]])))}`);
  return { name: 'churn', rows, details: { stages: stages.length, ticks, runs } };
}

async function run(variant: Variant, prefix: string, stages: readonly StageRef[], ticks: number): Promise<Counts> {
  const redis = client();
  const host = new HostModel(redis, prefix);
  let e: DispatchEngine | undefined;
  let tick: (ref: StageRef) => Promise<void>;
  const skipUntil = new Map<StageRef, number>();
  if (variant === 'naive') {
    const naive = new NaiveScheduler(host);
    tick = (ref) => naive.dispatch(ref);
  } else {
    let n = 0;
    const eng = engine(prefix, {
      executor: (ref) => host.attempt(ref, `a${++n}`),
      rollback: (ref) => host.rollback(ref),
      journal: (ref, ev) => host.journal(ref, ev.type, ev.reason),
    });
    e = eng;
    await eng.isStageDeferred({ scope: ['warm'], stage: 'up' }); // connect and load scripts before counting
    tick = async (ref) => {
      if (variant === 'plugin-until' && (skipUntil.get(ref) ?? 0) > Date.now()) return;
      const r = await eng.dispatchStage(ref, { n: 1 });
      if (r.until !== undefined) skipUntil.set(ref, r.until);
    };
  }
  await redis.ping();
  const counter = new RedisCounter(redis);
  await counter.start();
  const t0 = Date.now();
  for (let t = 0; t < ticks; t++) await pool(stages, 50, tick);
  const seconds = (Date.now() - t0) / 1000;
  const c = await counter.stop();
  await e?.close();
  return {
    executorCalls: host.executorCalls,
    journalEvents: host.journalEvents,
    commands: c.commands,
    writes: c.writes,
    seconds,
  };
}
