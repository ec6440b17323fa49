import { spawn } from 'node:child_process';
import os from 'node:os';
import { Queue } from 'bullmq';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { benchPrefix, bullConnection, client, dropPrefix } from '../lib/redis';
import { deferAll, engine, refs } from '../lib/stages';
import { interleave, log, median, pool } from '../lib/stats';

/**
 * Clear by scope: `clearDeferrals([scope])` of 10,000 deferred stages, with
 * 0, 10,000 and 100,000 other deferred stages in the same queue, outside the
 * scope. One queue (prefix) per outside count, set up once; every round
 * defers 10,000 fresh stages in a new scope in each queue and times the clear
 * (index range of the scope, clear script in batches of 500, promotion of the
 * wake-ups). Rounds interleave the three queues. After each timed clear the
 * round cancels its stages (untimed): the clear leaves their promoted wake-ups
 * waiting (no worker runs here) and their licences marked `!`, which would
 * otherwise sit outside the next round's scope, and the "0 outside" queue
 * would not be empty after round 1. Each round checks its queue holds exactly
 * its `outside` stages before it starts.
 *
 * A fourth variant, interleaved with the three, is the floor: raw BullMQ
 * promoting as many delayed jobs (`job.promote()`, 500 at a time, as the
 * clear promotes its wake-ups), no plugin at all. A clear must promote each
 * wake-up (its stage is dispatched now), so it cannot take less than that.
 */
export function clearScope(ctx: BenchContext): Promise<ScenarioResult> {
  return clearRounds(ctx, 'clear-scope', 'clear by scope');
}

/**
 * The same rounds beside a CPU hog the scenario starts itself (one busy-looping
 * Node process per core, at the same priority as the bench and Redis), as a
 * host that clears a scope while its workers are busy would: the clear must
 * stay under a second and flat in the stages outside.
 */
export async function clearLoaded(ctx: BenchContext): Promise<ScenarioResult> {
  const hogs = os.cpus().map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  try {
    return await clearRounds(ctx, 'clear-loaded', `clear by scope, ${hogs.length} CPU hogs running`);
  } finally {
    for (const h of hogs) h.kill('SIGKILL');
  }
}

async function clearRounds(ctx: BenchContext, name: string, title: string): Promise<ScenarioResult> {
  const redis = client();
  const inScope = ctx.n(10_000, 500);
  const levels = [0, ctx.n(10_000, 500), ctx.n(100_000, 3_000)];
  const payload = { n: 1 };
  const queues = levels.map((outside) => ({ outside, prefix: benchPrefix(`${name}-${outside}`) }));
  const engines = queues.map((q) => engine(q.prefix));
  const rawPrefix = benchPrefix(`${name}-raw`);
  const raw = new Queue('q', { connection: bullConnection(), prefix: rawPrefix });
  try {
    for (const [i, q] of queues.entries()) {
      if (q.outside > 0) await deferAll(engines[i]!, refs('other', q.outside), payload, 128);
    }
    const variants = queues.map((_, i) => i);
    const runs = await interleave(ctx.n(5, 2), [...variants.map(String), 'raw'], async (v, round) => {
      if (v === 'raw') return rawPromotes(raw, inScope, round, payload);
      const e = engines[Number(v)]!;
      const { outside } = queues[Number(v)]!;
      await expectOnly(redis, e, outside);
      const scope = `in-${round}`;
      const stages = refs(scope, inScope);
      await deferAll(e, stages, payload, 128);
      const t0 = process.hrtime.bigint();
      const cleared = await e.clearDeferrals([scope]);
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (cleared !== inScope) throw new Error(`cleared ${cleared} of ${inScope}`);
      // untimed: remove the promoted wake-ups and their licences, so only `outside` stages remain
      await pool(stages, 128, (ref) => e.cancelActiveDispatch(ref, 'bench clean-up'));
      await expectOnly(redis, e, outside);
      return ms;
    });
    const medians = variants.map((i) => median(runs[String(i)]!));
    const base = medians[0]!;
    const rows: Row[] = queues.map((q, i) => ({
      scenario: title,
      measure: `clear ${inScope.toLocaleString('en-US')} in scope, ${q.outside.toLocaleString('en-US')} outside: ms${i > 0 ? ' (÷ 0 outside)' : ''}`,
      plugin: Math.round(medians[i]!),
      ratio: i > 0 ? medians[i]! / base : undefined,
      target: i > 0 ? '< 1000 ms, ratio ≤ 1.5' : '< 1000 ms',
      met: medians[i]! < 1000 && (i === 0 || medians[i]! / base <= 1.5),
    }));
    const floor = median(runs.raw!);
    rows.push({
      scenario: title,
      measure: `the floor: raw BullMQ promoting ${inScope.toLocaleString('en-US')} delayed jobs, 500 at a time (\`job.promote()\`), ms (the clear with 0 outside ÷ this floor: ${(base / floor).toFixed(2)})`,
      plugin: Math.round(floor),
      target: '(no target: the floor)',
      met: null,
    });
    log(
      `${title}: ${queues.map((q, i) => `${q.outside} outside ${medians[i]!.toFixed(0)} ms`).join(', ')}; raw BullMQ promoting as many ${floor.toFixed(0)} ms`,
    );
    return { name, rows, details: { inScope, levels, msByLevel: runs, medians, floor } };
  } finally {
    await Promise.all(engines.map((e) => e.close()));
    await raw.close();
    for (const q of [...queues, { prefix: rawPrefix }]) await dropPrefix(redis, q.prefix);
  }
}

/** Adds `count` delayed jobs to the raw queue (untimed), times promoting them 500 at a time, then drains it (untimed). */
async function rawPromotes(raw: Queue, count: number, round: number, payload: unknown): Promise<number> {
  const jobs = [];
  for (let i = 0; i < count; i += 1000) {
    const chunk = Array.from({ length: Math.min(1000, count - i) }, (_, j) => ({
      name: 'image',
      data: payload,
      opts: { jobId: `r${round}-${i + j}`, delay: 600_000 },
    }));
    jobs.push(...(await raw.addBulk(chunk)));
  }
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < jobs.length; i += 500) await Promise.all(jobs.slice(i, i + 500).map((j) => j.promote()));
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  await raw.drain(true);
  const left = await raw.getJobCounts('delayed', 'wait', 'prioritized');
  if (Object.values(left).some((n) => n !== 0)) throw new Error(`clear-scope raw: left ${JSON.stringify(left)}`);
  return ms;
}

/** Throws unless the queue holds exactly `outside` stages: as many licences, delayed wake-ups, nothing waiting. */
async function expectOnly(
  redis: ReturnType<typeof client>,
  e: ReturnType<typeof engine>,
  outside: number,
): Promise<void> {
  const licences = await redis.zcard(`${e.queue.opts.prefix}:${e.queue.name}:sd:licences`);
  const counts = await e.queue.getJobCounts('delayed', 'wait', 'prioritized', 'active');
  const queued = { licences, ...counts };
  const want = { licences: outside, delayed: outside, wait: 0, prioritized: 0, active: 0 };
  if (JSON.stringify(queued) !== JSON.stringify(want)) {
    throw new Error(`clear-scope: expected ${JSON.stringify(want)} in the queue, found ${JSON.stringify(queued)}`);
  }
}
