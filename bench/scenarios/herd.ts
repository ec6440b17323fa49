import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { parseLicence } from '../../src/job-data';
import { benchPrefix, client, dropPrefix } from '../lib/redis';
import { engine, refs } from '../lib/stages';
import { interleave, log, median, pool } from '../lib/stats';

type Variant = 'jitter-default' | 'jitter-0';

/**
 * Wake-up herd: N stages deferred together (as fast as one process can, 128 in
 * flight) with the default 30 s capacity window. Their due times are read back
 * from the licence index (each wake-up id encodes its window's end). One
 * process cannot defer 10,000 stages within one second here, so the measure
 * takes the stages whose deferral started in the busiest second: spread =
 * (latest - earliest due time among them) ÷ window; the busiest 1 % of the
 * window shows how many of them wake at once. Compared with `jitter: 0` (a
 * fixed window: they all wake within about a second).
 */
export async function herd(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const count = ctx.n(10_000, 1_000);
  const windowMs = 30_000;
  const runs = await interleave(ctx.n(2, 1), ['jitter-default', 'jitter-0'] as Variant[], async (variant) => {
    const prefix = benchPrefix(`herd-${variant}`);
    const e = engine(prefix, {
      windows: { capacitySeconds: windowMs / 1000, ...(variant === 'jitter-0' ? { jitter: 0 } : {}) },
    });
    try {
      const t0 = Date.now();
      // Each stage: when its dispatch started, and the due time of its wake-up (from the licence index).
      const started = new Map<string, number>();
      await pool(refs('book', count), 128, async (ref) => {
        started.set(`${ref.scope.join('/')}/${ref.stage}`, Date.now());
        const r = await e.dispatchStage(ref, { n: 1 });
        if (r.until === undefined || r.deferred) throw new Error(`expected a new deferral, got ${JSON.stringify(r)}`);
      });
      const deferSpanMs = Date.now() - t0;
      const licences = await redis.zrange(`${prefix}:q:sd:licences`, '0', '-1');
      const rows = licences.map((l) => ({
        start: started.get(l.slice(0, l.indexOf('@'))) ?? NaN,
        due: parseLicence(l)?.until ?? NaN,
      }));
      if (rows.length !== count || rows.some((r) => Number.isNaN(r.start + r.due)))
        throw new Error('licences do not match the stages');
      // The busiest second of deferrals: the stages whose dispatch started in it.
      const bySecond = new Map<number, typeof rows>();
      for (const r of rows) {
        const k = Math.floor(r.start / 1000);
        bySecond.set(k, [...(bySecond.get(k) ?? []), r]);
      }
      const sameSecond = [...bySecond.values()].sort((a, b) => b.length - a.length)[0]!;
      const due = sameSecond.map((r) => r.due).sort((a, b) => a - b);
      const spread = (due[due.length - 1]! - due[0]!) / windowMs;
      const lengths = rows.map((r) => r.due - r.start);
      const bucket = windowMs / 100;
      const counts = new Map<number, number>();
      for (const d of due)
        counts.set(Math.floor((d - due[0]!) / bucket), (counts.get(Math.floor((d - due[0]!) / bucket)) ?? 0) + 1);
      return {
        spread,
        sameSecondStages: sameSecond.length,
        windowLengthSpread: (Math.max(...lengths) - Math.min(...lengths)) / windowMs,
        deferSpanMs,
        busiestPercentShare: Math.max(...counts.values()) / sameSecond.length,
      };
    } finally {
      await e.close();
      await dropPrefix(redis, prefix);
    }
  });
  const spread = median(runs['jitter-default'].map((r) => r.spread));
  const spread0 = median(runs['jitter-0'].map((r) => r.spread));
  const span = median(runs['jitter-default'].map((r) => r.deferSpanMs));
  const sameSecond = Math.round(median(runs['jitter-default'].map((r) => r.sameSecondStages)));
  log(
    `herd: spread ${(spread * 100).toFixed(1)} % (jitter 0: ${(spread0 * 100).toFixed(1)} %), deferred in ${span} ms`,
  );
  const rows: Row[] = [
    {
      scenario: 'wake-up herd',
      measure: `${count.toLocaleString('en-US')} stages deferred in ${(span / 1000).toFixed(1)} s; the ${sameSecond} deferred in the busiest second: spread of due times ÷ 30 s window (jitter 0 as baseline)`,
      plugin: `${(spread * 100).toFixed(1)} %`,
      baseline: `${(spread0 * 100).toFixed(1)} %`,
      target: '≥ 10 %',
      met: spread >= 0.1,
    },
    {
      scenario: 'wake-up herd',
      measure: 'share of those stages due in the busiest 1 % of the window',
      plugin: `${(median(runs['jitter-default'].map((r) => r.busiestPercentShare)) * 100).toFixed(1)} %`,
      baseline: `${(median(runs['jitter-0'].map((r) => r.busiestPercentShare)) * 100).toFixed(1)} %`,
      target: '',
      met: null,
    },
  ];
  return { name: 'herd', rows, details: { count, windowMs, runs } };
}
