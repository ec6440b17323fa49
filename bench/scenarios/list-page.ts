import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, client, dropPrefix } from '../lib/redis';
import { deferAll, engine, refs } from '../lib/stages';
import { fmt, log, median } from '../lib/stats';

const PAGE = 100;
const CALLS = 21;

/**
 * `listDeferred(undefined, { limit: 100 })` with 1,000 deferred stages, then
 * with 1,000,000 (10,000 with --quick): the first page, and a page from the
 * middle (its cursor read off the licence index), each the median of 21
 * calls; and the heap a call grows by (collected before it with --expose-gc;
 * nothing asked of the collector during it). A page reads an index
 * range and its own stages only, so neither may grow with the total.
 */
export async function listPage(ctx: BenchContext): Promise<ScenarioResult> {
  const redis = client();
  const total = ctx.n(1_000_000, 10_000);
  const small = 1_000;
  const prefix = benchPrefix('list-page');
  const e = engine(prefix);
  const gc = (globalThis as { gc?: () => void }).gc;
  const measure = async (cursor: string | null) => {
    const ms: number[] = [];
    const held: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      gc?.();
      const before = process.memoryUsage().heapUsed;
      const t0 = process.hrtime.bigint();
      const page = await e.listDeferred(undefined, { limit: PAGE, cursor });
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
      // the page still held, no collection asked for since the call began
      held.push(process.memoryUsage().heapUsed - before);
      if (page.stages.length !== PAGE) throw new Error(`list-page: a page of ${page.stages.length}, not ${PAGE}`);
    }
    return { ms: median(ms), heapBytes: median(held) };
  };
  const index = `${prefix}:q:sd:licences`;
  try {
    await deferAll(e, refs('list', small), { n: 1 }, 128);
    const atSmall = { first: await measure(null), middle: await measure(await middleLicence(redis, index)) };
    log(`list-page: deferring ${fmt(total)} stages in all ...`);
    await deferAll(e, refs('list', total - small, small), { n: 1 }, 128);
    const atTotal = { first: await measure(null), middle: await measure(await middleLicence(redis, index)) };
    const timed = (which: 'first' | 'middle', what: string): Row => ({
      scenario: 'list page',
      measure: `${what} of ${PAGE}, ${fmt(total)} deferred stages: ms (baseline: with ${fmt(small)})`,
      plugin: Number(atTotal[which].ms.toFixed(1)),
      baseline: Number(atSmall[which].ms.toFixed(1)),
      ratio: atTotal[which].ms / atSmall[which].ms,
      target: '< 50 ms',
      met: atTotal[which].ms < 50,
    });
    const rows: Row[] = [
      timed('first', 'first page'),
      timed('middle', 'a page from the middle (its cursor)'),
      {
        scenario: 'list page',
        measure: `heap a page call grows by, ${fmt(total)} deferred (baseline: with ${fmt(small)}): bytes${gc ? '' : ' (no --expose-gc: noisy)'}`,
        plugin: Math.round(atTotal.first.heapBytes),
        baseline: Math.round(atSmall.first.heapBytes),
        target: 'does not grow with the total',
        met: null,
      },
    ];
    log(`list page: first ${atSmall.first.ms.toFixed(1)} → ${atTotal.first.ms.toFixed(1)} ms`);
    return { name: 'list-page', rows, details: { total, small, atSmall, atTotal } };
  } finally {
    await e.close();
    await dropPrefix(redis, prefix);
  }
}

/** The licence in the middle of the index: a cursor as a reader half-way through would hold it. */
async function middleLicence(redis: ReturnType<typeof client>, index: string): Promise<string | null> {
  const n = await redis.zcard(index);
  const [m] = await redis.zrange(index, String(Math.floor(n / 2)), String(Math.floor(n / 2)));
  return m ?? null;
}
