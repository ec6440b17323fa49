import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, client, dropPrefix, RedisCounter } from '../lib/redis';
import { blockedEngine, refs } from '../lib/stages';
import { log, pool } from '../lib/stats';

/**
 * Tick storm: a scheduler calls `dispatchStage` for every one of 1,000
 * blocked stages (no worker anywhere), 100 ticks back to back (each tick
 * 1,000 calls, 50 in flight). The first tick defers every stage; every later
 * call must be suppressed. Counts executor calls, and the Redis commands and
 * writes of ticks 2..N.
 */
export async function tickStorm(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const prefix = benchPrefix('storm');
  const stageCount = 1000;
  const ticks = ctx.n(100, 12);
  const stages = refs('book', stageCount);
  const { engine: e, calls: executorCallsSoFar } = blockedEngine(prefix);
  const payload = { n: 1 };
  try {
    const tickMs: number[] = [];
    const counter = new RedisCounter(redis);
    let later = { commands: 0, writes: 0, scripts: 0 };
    const t0 = Date.now();
    for (let t = 0; t < ticks; t++) {
      if (t === 1) await counter.start();
      const s = process.hrtime.bigint();
      await pool(stages, 50, (ref) => e.dispatchStage(ref, payload));
      tickMs.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    if (ticks > 1) later = await counter.stop();
    const seconds = (Date.now() - t0) / 1000;
    const calls = stageCount * ticks;
    log(`tick storm: ${executorCallsSoFar()} executor calls for ${calls} dispatches in ${seconds.toFixed(1)} s`);
    const rows: Row[] = [
      {
        scenario: 'tick storm',
        measure: `executor calls, ${stageCount} blocked stages × ${ticks} ticks`,
        plugin: executorCallsSoFar(),
        target: `exactly ${stageCount}`,
        met: executorCallsSoFar() === stageCount,
      },
      {
        scenario: 'tick storm',
        measure: `Redis writes / commands per suppressed call (ticks 2..${ticks})`,
        plugin: `${later.writes / (calls - stageCount)} / ${later.commands / (calls - stageCount)}`,
        target: '0 writes',
        met: later.writes === 0,
      },
    ];
    return {
      name: 'tick-storm',
      rows,
      details: {
        stages: stageCount,
        ticks,
        executorCalls: executorCallsSoFar(),
        seconds,
        firstTickMs: tickMs[0],
        laterTickMsMedian: [...tickMs.slice(1)].sort((a, b) => a - b)[Math.floor((tickMs.length - 1) / 2)],
        laterTicks: later,
      },
    };
  } finally {
    await e.close();
    await dropPrefix(redis, prefix);
  }
}
