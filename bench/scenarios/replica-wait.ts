import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createDispatchEngine, type DispatchEngine } from '../../src';
import { dropClusterPrefix, RedisClusterHarness, redisServerAvailable } from '../../test/cluster/harness';
import type { BenchContext, Row, ScenarioResult } from '../lib/report';
import { deferAll, NO_WORKER, refs } from '../lib/stages';
import { interleave, log, median } from '../lib/stats';

type Variant = 'wait' | 'no-wait';

/**
 * What `waitForReplicas` costs on a Redis Cluster (3 masters + 3 replicas on
 * loopback, started here): deferrals per second with the Cluster default
 * (`WAIT 1 250` after each deferral) vs `waitForReplicas: false`, at
 * concurrency 64 and 1, interleaved rounds. Skipped without redis-server.
 */
export async function replicaWait(ctx: BenchContext): Promise<ScenarioResult> {
  if (!redisServerAvailable()) {
    log('replica-wait: skipped, redis-server / redis-cli are not installed');
    return { name: 'replica-wait', rows: [], details: { skipped: true } };
  }
  const harness = await RedisClusterHarness.start({ masters: 3, replicasPerMaster: 1 });
  const cluster = harness.connect({ redisOptions: { maxRetriesPerRequest: null } });
  const prefixes: string[] = [];
  try {
    const stages = ctx.n(2000, 400);
    const rounds = ctx.n(3, 2);
    const lagged: Record<Variant, number> = { wait: 0, 'no-wait': 0 };
    const measure = async (variant: Variant, concurrency: number, count: number) => {
      const prefix = `{bench-wait-${randomUUID().slice(0, 8)}}`;
      prefixes.push(prefix);
      const e: DispatchEngine = createDispatchEngine({
        connection: cluster,
        prefix,
        queueName: 'q',
        executor: async () => NO_WORKER,
        windows: { capacitySeconds: 600 },
        ...(variant === 'no-wait' ? { waitForReplicas: false as const } : {}),
      });
      let lags = 0;
      e.on('replicaLag', () => lags++);
      try {
        await e.isStageDeferred({ scope: ['warm'], stage: 'up' });
        const t0 = performance.now();
        await deferAll(e, refs('b', count), null, concurrency);
        const seconds = (performance.now() - t0) / 1000;
        // a WAIT that timed out (the replicas fell behind: a loaded machine) is part of what the
        // default costs then; the row says how many there were
        lagged[variant] += lags;
        return count / seconds;
      } finally {
        await e.close();
        await dropClusterPrefix(cluster, prefix);
      }
    };
    const wide = await interleave(rounds, ['wait', 'no-wait'] as Variant[], (v) => measure(v, 64, stages));
    const lagsWide = lagged.wait;
    const narrow = await interleave(rounds, ['wait', 'no-wait'] as Variant[], (v) => measure(v, 1, stages / 4));
    const row = (concurrency: number, runs: Record<Variant, number[]>, lags: number): Row => {
      const plugin = median(runs.wait);
      const baseline = median(runs['no-wait']);
      log(
        `replica-wait c=${concurrency}: ${plugin.toFixed(0)} vs ${baseline.toFixed(0)} deferrals/s, ${lags} replicaLag`,
      );
      return {
        scenario: 'replica-wait',
        measure:
          `deferrals/s on a Cluster, concurrency ${concurrency}: waitForReplicas (default) vs false` +
          (lags > 0 ? ` (${lags} replicaLag events: WAIT timed out, the replicas fell behind)` : ''),
        plugin: Math.round(plugin),
        baseline: Math.round(baseline),
        ratio: plugin / baseline,
        target: '',
        met: null,
      };
    };
    return {
      name: 'replica-wait',
      rows: [row(64, wide, lagsWide), row(1, narrow, lagged.wait - lagsWide)],
      details: { stages, rounds, concurrency64: wide, concurrency1: narrow, replicaLag: lagged },
    };
  } finally {
    await Promise.all(prefixes.map((p) => dropClusterPrefix(cluster, p).catch(() => undefined)));
    await harness.stop();
  }
}
