import { Queue } from 'bullmq';
import type IORedis from 'ioredis';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, bullConnection, client, dropPrefix, usedMemory } from '../lib/redis';
import { deferAll, engine, refs } from '../lib/stages';
import { interleave, log, median } from '../lib/stats';

type Variant = 'bare' | 'bare-dedup' | 'plugin-log' | 'plugin-nolog';

/** A JSON payload of exactly 200 bytes. */
export function payload200(): { blob: string } {
  const p = { blob: '' };
  p.blob = 'x'.repeat(200 - JSON.stringify(p).length);
  return p;
}

/**
 * Memory: N deferred stages with a 200-byte payload vs N bare BullMQ delayed
 * jobs with the same payload (`queue.addBulk`, `{ delay }` only). Bytes per
 * item = INFO memory `used_memory` delta ÷ N, each variant on its own prefix,
 * keys dropped in between. The plugin is measured with its defaults
 * (`jobLog: false`) and with `jobLog: true` (one log line per deferral). A
 * sample of stages is broken down with MEMORY USAGE per key. The targets are
 * against `bare-dedup`, the reference: what raw BullMQ needs for one wake-up
 * per stage, a delayed job with a stage-named job id and a deduplication key.
 */
export async function memory(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const count = ctx.n(100_000, 3_000);
  const variants: Variant[] = ['bare', 'bare-dedup', 'plugin-log', 'plugin-nolog'];
  const runs = await interleave(ctx.n(1, 1), variants, async (variant) => {
    const prefix = benchPrefix(`mem-${variant}`);
    try {
      return await measure(redis, variant, prefix, count);
    } finally {
      await dropPrefix(redis, prefix);
    }
  });
  const bare = median(runs.bare.map((r) => r.bytesPerItem));
  const reference = median(runs['bare-dedup'].map((r) => r.bytesPerItem));
  const rows: Row[] = [];
  // the targets are against what raw BullMQ itself needs for one wake-up per stage (issue 12)
  for (const v of ['plugin-nolog', 'plugin-log'] as const) {
    const plugin = median(runs[v].map((r) => r.bytesPerItem));
    const ratio = plugin / reference;
    log(`memory ${v}: ${plugin.toFixed(0)} B/stage vs reference ${reference.toFixed(0)} B, ratio ${ratio.toFixed(3)}`);
    rows.push({
      scenario: 'memory',
      measure:
        v === 'plugin-nolog'
          ? `bytes per deferred stage, default options (jobLog: false) ÷ the reference, ${count.toLocaleString('en-US')} × 200 B payload`
          : 'bytes per deferred stage with `jobLog: true` (opt-in: one log list a wake-up) ÷ the reference',
      plugin: Math.round(plugin),
      baseline: Math.round(reference),
      ratio,
      target: v === 'plugin-nolog' ? '≤ 1.00' : '',
      met: v === 'plugin-nolog' ? ratio <= 1 : null,
    });
  }
  rows.push({
    scenario: 'memory',
    measure:
      'the reference: raw BullMQ delayed job with a stage-named id and a deduplication key, bytes (baseline: a bare delayed job)',
    plugin: Math.round(reference),
    baseline: Math.round(bare),
    ratio: reference / bare,
    target: '',
    met: null,
  });
  return { name: 'memory', rows, details: { count, payloadBytes: 200, runs } };
}

async function measure(redis: IORedis, variant: Variant, prefix: string, count: number) {
  const payload = payload200();
  const before = await settledMemory(redis);
  const t0 = Date.now();
  let sample: Record<string, number> = {};
  if (variant === 'bare' || variant === 'bare-dedup') {
    const queue = new Queue('q', { connection: bullConnection(), prefix });
    const opts = (i: number) => {
      if (variant === 'bare') return { delay: 600_000 };
      const sid = `book-1/s${i}/image`;
      return { delay: 600_000, jobId: `${sid}@w.${(Date.now() + 600_000).toString(36)}`, deduplication: { id: sid } };
    };
    for (let i = 0; i < count; i += 1000) {
      const n = Math.min(1000, count - i);
      await queue.addBulk(Array.from({ length: n }, (_, k) => ({ name: 'image', data: payload, opts: opts(i + k) })));
    }
    await queue.close();
    sample = await breakdown(redis, prefix, 'bare');
  } else {
    const e = engine(prefix, { jobLog: variant === 'plugin-log' });
    await deferAll(e, refs('book-1', count, 0, 'image'), payload, 128);
    await e.close();
    sample = await breakdown(redis, prefix, 'plugin');
  }
  const seconds = (Date.now() - t0) / 1000;
  const after = await settledMemory(redis);
  const bytesPerItem = (after - before) / count;
  return { bytesPerItem, usedMemoryBefore: before, usedMemoryAfter: after, seconds, sampleBytesPerItem: sample };
}

/** used_memory, read twice until it stops moving (lazy frees of earlier drops). */
async function settledMemory(redis: IORedis): Promise<number> {
  let last = await usedMemory(redis);
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await usedMemory(redis);
    if (Math.abs(now - last) < 4096) return now;
    last = now;
  }
  return last;
}

/** MEMORY USAGE of the per-item keys of up to 200 items, averaged by key kind. */
async function breakdown(redis: IORedis, prefix: string, kind: 'bare' | 'plugin'): Promise<Record<string, number>> {
  const base = `${prefix}:q:`;
  const ids = await redis.zrange(`${base}delayed`, '0', '199');
  const sum: Record<string, number> = {};
  const add = (k: string, v: number | null) => (sum[k] = (sum[k] ?? 0) + (v ?? 0));
  for (const id of ids) {
    add('job hash', await redis.memory('USAGE', `${base}${id}`, 'SAMPLES', 0));
    if (kind === 'plugin') {
      const sid = id.slice(0, id.indexOf('@'));
      add('marker', await redis.memory('USAGE', `${base}sd:deferred:${sid}`, 'SAMPLES', 0));
      add('log list', await redis.memory('USAGE', `${base}${id}:logs`, 'SAMPLES', 0));
    }
  }
  const n = Math.max(1, ids.length);
  const out = Object.fromEntries(Object.entries(sum).map(([k, v]) => [k, Math.round(v / n)]));
  out['job id length'] = Math.round(ids.reduce((a, id) => a + id.length, 0) / n);
  const job = await redis.hgetall(`${base}${ids[0]}`);
  out['job data length'] = (job.data ?? '').length;
  out['job opts length'] = (job.opts ?? '').length;
  return out;
}
