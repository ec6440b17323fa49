import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, client, dropPrefix, RedisCounter, RoundTripCounter } from '../lib/redis';
import { deferAll, blockedEngine, refs } from '../lib/stages';
import { interleave, log, median } from '../lib/stats';

type Variant = 'dispatchStage' | 'enqueue';

/**
 * A tick that meets a deferred stage: `dispatchStage` and `enqueue` of N
 * stages already deferred, one call at a time. Per call: round trips
 * (MONITOR), commands (commandstats), writes (Redis' dirty counter), executor calls.
 */
export async function suppressedTick(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const prefix = benchPrefix('suppressed');
  const stages = refs('book', ctx.n(1000, 200));
  const { engine: e, calls: executorCallsSoFar } = blockedEngine(prefix);
  const payload = { n: 1 };
  try {
    await deferAll(e, stages, payload);
    const deferCalls = executorCallsSoFar();
    const rt = new RoundTripCounter(redis);
    await rt.start();
    const runs = await interleave(ctx.n(3, 2), ['dispatchStage', 'enqueue'] as Variant[], async (variant) => {
      rt.reset();
      const calls0 = executorCallsSoFar();
      const counter = new RedisCounter(redis);
      await counter.start();
      for (const ref of stages) {
        if (variant === 'dispatchStage') {
          const r = await e.dispatchStage(ref, payload);
          if (!r.deferred) throw new Error(`expected a suppressed dispatch, got ${JSON.stringify(r)}`);
        } else {
          const r = await e.enqueue(ref, payload);
          if (r.added || r.reason !== 'deferred')
            throw new Error(`expected a suppressed enqueue, got ${JSON.stringify(r)}`);
        }
      }
      await rt.flush();
      const c = await counter.stop();
      const n = stages.length;
      return {
        roundTrips: rt.roundTrips / n,
        commands: c.commands / n,
        writes: c.writes / n,
        executorCalls: (executorCallsSoFar() - calls0) / n,
        byCommand: c.byCommand,
      };
    });
    await rt.stop();
    const rows: Row[] = [];
    for (const v of ['dispatchStage', 'enqueue'] as Variant[]) {
      const rtm = median(runs[v].map((r) => r.roundTrips));
      const wm = median(runs[v].map((r) => r.writes));
      const cm = median(runs[v].map((r) => r.commands));
      const xm = median(runs[v].map((r) => r.executorCalls));
      log(`suppressed ${v}: ${rtm} round trips, ${wm} writes, ${cm} commands, ${xm} executor calls per call`);
      rows.push({
        scenario: 'suppressed tick',
        measure: `${v} of a deferred stage: round trips / writes per call (${cm} commands)`,
        plugin: `${rtm} / ${wm}`,
        target: '1 / 0',
        met: rtm === 1 && wm === 0 && xm === 0,
      });
    }
    return { name: 'suppressed-tick', rows, details: { stages: stages.length, deferCalls, perCall: runs } };
  } finally {
    await e.close();
    await dropPrefix(redis, prefix);
  }
}
