import { noCapacity, type DispatchEngine, type ExecutorResult, type StageRef } from '../../src';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, client, dropPrefix, RedisCounter, RoundTripCounter } from '../lib/redis';
import { engine, NO_WORKER, refs } from '../lib/stages';
import { log, median, pool } from '../lib/stats';
import { fairnessRun } from './resource-fairness';

/**
 * How long the gate's window lasts in this scenario, ms (the closing answer's `retryAfterMs`):
 * longer than a tick of every waiting stage takes, so the tick sees one window.
 */
const GATE_MS = 10_000;

/** Waits until the gate's window (its value, on Redis' clock) has ended. */
async function gateWindowEnded(redis: ReturnType<typeof client>, key: string): Promise<void> {
  for (;;) {
    const [g, [sec, us]] = await Promise.all([redis.get(key), redis.time()]);
    const now = Number(sec) * 1000 + Math.floor(Number(us) / 1000);
    if (g === null || (!g.startsWith('p') && Number(g) <= now)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Resource scale: stages waiting on one resource (`resourceOf`).
 * - Executor calls in one gate window with N stages waiting (10,000): a tick dispatches every
 *   stage once the window ended. Baseline: the same stages with no resource, each deferred for
 *   the same window (each probes for itself).
 * - One gated dispatch: round trips (MONITOR; a MULTI is one) and writes (Redis' dirty counter),
 *   vs one plain capacity deferral (no resource).
 * - `wakeDeferred({ resource, limit: 100 })` with 10,000 waiting vs 1,000: ms.
 * - Fairness: books of 1,000/10/10 stages, 3 slots: each small book's time until done ÷ its fair
 *   share, `lineOrder: 'roundRobin'` vs `'oldest'` (see resource-fairness.ts).
 */
export async function resourceScale(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const big = ctx.n(10_000, 2_000);
  const small = ctx.n(1_000, 500);
  const prefixes: string[] = [];
  const engines: DispatchEngine[] = [];
  /** An engine whose executor always answers `answer` (no worker, unless told otherwise), its calls counted. */
  const make = (name: string, gated: boolean, answer: ExecutorResult<string> = NO_WORKER) => {
    const prefix = benchPrefix(`resource-${name}`);
    prefixes.push(prefix);
    let calls = 0;
    const e = engine(prefix, {
      executor: async () => {
        calls++;
        return answer;
      },
      windows: { capacitySeconds: 600, capacityMaxSeconds: 600, jitter: 0 },
      ...(gated ? { resourceOf: () => 'gpu' } : {}),
    });
    engines.push(e);
    return { e, calls: () => calls };
  };
  try {
    // 1. executor calls per window: every answer is "full, ask again in GATE_MS"
    const perWindow: Record<string, number> = {};
    for (const gated of [true, false]) {
      const { e, calls } = make(gated ? 'tick' : 'tick-plain', gated, noCapacity({ retryAfterMs: GATE_MS }));
      const stages = refs('tick', big);
      await e.dispatchStage(stages[0]!, {});
      await pool(stages.slice(1), 64, (ref) => e.dispatchStage(ref, {}));
      // every window of the setup has ended (the gate's, or each plain stage's own); for the gate,
      // its current window too (a probe may have closed it again while the others deferred)
      await new Promise((r) => setTimeout(r, GATE_MS + 100));
      if (gated) await gateWindowEnded(redis, e.queue.toKey('sd:gate:gpu'));
      const before = calls();
      await pool(stages, 64, (ref) => e.dispatchStage(ref, {}));
      perWindow[gated ? 'gated' : 'plain'] = calls() - before;
    }

    // 2. one gated dispatch vs one plain deferral: round trips and writes
    const cost: Record<string, { roundTrips: number; writes: number }[]> = { gated: [], plain: [] };
    const samples = ctx.n(20, 5);
    const rt = new RoundTripCounter(redis);
    await rt.start();
    try {
      for (const gated of [true, false]) {
        const { e } = make(gated ? 'cost' : 'cost-plain', gated);
        // the gate closes (gated); the baseline's first deferral starts its wait index
        await e.dispatchStage({ scope: ['cost', 'first'], stage: 'image' }, {});
        for (let i = 0; i < samples; i++) {
          const ref: StageRef = { scope: ['cost', `s${i}`], stage: 'image' };
          const counter = new RedisCounter(redis);
          await counter.start();
          await rt.flush();
          rt.reset();
          const r = await e.dispatchStage(ref, {});
          await rt.flush();
          const roundTrips = rt.roundTrips;
          const counts = await counter.stop();
          if (r.dispatched || r.until === undefined) throw new Error(`expected a deferral, got ${JSON.stringify(r)}`);
          cost[gated ? 'gated' : 'plain']!.push({ roundTrips, writes: counts.writes });
        }
      }
    } finally {
      await rt.stop();
    }

    // 3. waking 100 of a long line vs a short one
    const wakeMs: Record<string, number[]> = {};
    for (const size of [small, big]) {
      const { e } = make(`line-${size}`, true);
      const stages = refs('line', size);
      await pool(stages, 64, (ref) => e.dispatchStage(ref, {}));
      const times: number[] = [];
      for (let round = 0; round < ctx.n(5, 3); round++) {
        const t0 = process.hrtime.bigint();
        const r = await e.wakeDeferred({ resource: 'gpu', limit: 100 });
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
        if (r.woken.length !== 100) throw new Error(`woke ${r.woken.length} of 100`);
      }
      wakeMs[String(size)] = times;
    }

    // 4. fairness across books
    const bigBook = ctx.n(1_000, 200);
    const fair = {
      roundRobin: await fairnessRun('roundRobin', bigBook, 10),
      oldest: await fairnessRun('oldest', bigBook, 10),
    };
    const worst = (r: { ratios: number[] }) => Math.max(...r.ratios);

    const m = (k: 'gated' | 'plain', f: 'roundTrips' | 'writes') => median(cost[k]!.map((c) => c[f]));
    const wakeBig = median(wakeMs[String(big)]!);
    const wakeSmall = median(wakeMs[String(small)]!);
    const n = big.toLocaleString('en-US');
    const rows: Row[] = [
      {
        scenario: 'resource-scale',
        measure: `executor calls in one gate window, ${n} stages waiting on one resource (baseline: no resource)`,
        plugin: perWindow.gated!,
        baseline: perWindow.plain!,
        target: '1',
        met: perWindow.gated === 1,
      },
      {
        scenario: 'resource-scale',
        measure: 'one gated dispatch: round trips (baseline: a plain capacity deferral)',
        plugin: m('gated', 'roundTrips'),
        baseline: m('plain', 'roundTrips'),
        target: '1',
        met: m('gated', 'roundTrips') <= 1,
      },
      {
        scenario: 'resource-scale',
        measure: 'one gated dispatch: writes (baseline: a plain capacity deferral)',
        plugin: m('gated', 'writes'),
        baseline: m('plain', 'writes'),
        target: '≤ baseline',
        met: m('gated', 'writes') <= m('plain', 'writes'),
      },
      {
        scenario: 'resource-scale',
        measure: `wakeDeferred({ resource, limit: 100 }), ${n} vs ${small.toLocaleString('en-US')} waiting: ms (÷ small)`,
        plugin: Math.round(wakeBig * 10) / 10,
        baseline: Math.round(wakeSmall * 10) / 10,
        ratio: wakeBig / wakeSmall,
        target: 'ratio ≤ 1.5',
        met: wakeBig / wakeSmall <= 1.5,
      },
      {
        scenario: 'resource-scale',
        measure: `fairness: books of ${bigBook.toLocaleString('en-US')}/10/10, 3 slots: time until each small book is done ÷ its fair share (in the farm's renders), worst (lineOrder roundRobin; baseline: oldest)`,
        plugin: Math.round(worst(fair.roundRobin) * 100) / 100,
        baseline: Math.round(worst(fair.oldest) * 100) / 100,
        target: '≤ 1.5',
        met: worst(fair.roundRobin) <= 1.5,
      },
    ];
    log(`resource-scale: ${rows.map((r) => `${r.measure}: ${r.plugin} vs ${r.baseline}`).join('; ')}`);
    return { name: 'resource-scale', rows, details: { big, small, perWindow, cost, wakeMs, fair } };
  } finally {
    await Promise.all(engines.map((e) => e.close()));
    for (const p of prefixes) await dropPrefix(redis, p);
  }
}
