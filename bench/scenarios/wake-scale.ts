import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, client, dropPrefix } from '../lib/redis';
import { deferAll, engine, refs } from '../lib/stages';
import { interleave, log, median, pool } from '../lib/stats';

/**
 * Wake scale (issue 11): `wakeDeferred` of 100 stages, in a queue that holds
 * 1,000 or 100,000 other deferred stages outside the filter. Two filters per
 * round, each on 100 fresh stages: by stage kind (`{ stage: 'gpu' }`) and by
 * scope (`{ scope: ['w-<round>'] }`). The time must not grow with the stages
 * outside the filter: the ratio of the large queue to the small one stays
 * near 1. After each timed wake the round cancels its stages (untimed).
 */
export async function wakeScale(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const woken = 100;
  const levels = [ctx.n(1_000, 500), ctx.n(100_000, 5_000)];
  const queues = levels.map((outside) => ({ outside, prefix: benchPrefix(`wake-${outside}`) }));
  const engines = queues.map((q) => engine(q.prefix));
  try {
    for (const [i, q] of queues.entries()) await deferAll(engines[i]!, refs('other', q.outside), { n: 1 }, 128);
    const variants = queues.flatMap((_, i) => [`${i}:stage`, `${i}:scope`]);
    const runs = await interleave(ctx.n(7, 3), variants, async (v, round) => {
      const [i, filter] = v.split(':') as [string, 'stage' | 'scope'];
      const e = engines[Number(i)]!;
      const scope = `w-${filter}-${round}`;
      const stages = refs(scope, woken, 0, filter === 'stage' ? 'gpu' : 'image');
      await deferAll(e, stages, { n: 1 }, 64);
      const t0 = process.hrtime.bigint();
      const r = await e.wakeDeferred(
        filter === 'stage' ? { stage: 'gpu', limit: woken } : { scope: [scope], limit: woken },
      );
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (r.woken.length !== woken) throw new Error(`woke ${r.woken.length} of ${woken}`);
      await pool(stages, 64, (ref) => e.cancelActiveDispatch(ref, 'bench clean-up'));
      return ms;
    });
    const rows: Row[] = (['stage', 'scope'] as const).map((filter) => {
      const small = median(runs[`0:${filter}`]!);
      const large = median(runs[`1:${filter}`]!);
      return {
        scenario: 'wake-scale',
        measure: `wakeDeferred ${woken} by ${filter}, ${levels[1]!.toLocaleString('en-US')} vs ${levels[0]!.toLocaleString('en-US')} deferred outside: ms (÷ small)`,
        plugin: Math.round(large),
        baseline: Math.round(small),
        ratio: large / small,
        target: 'ratio ≤ 1.5',
        met: large / small <= 1.5,
      };
    });
    log(`wake-scale: ${rows.map((r) => `${r.measure} ${r.plugin} vs ${r.baseline} ms`).join('; ')}`);
    return { name: 'wake-scale', rows, details: { woken, levels, msByVariant: runs } };
  } finally {
    await Promise.all(engines.map((e) => e.close()));
    for (const q of queues) await dropPrefix(redis, q.prefix);
  }
}
