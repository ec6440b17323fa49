/**
 * The benchmark: `npm run bench` (full) or `npm run bench -- --quick`.
 * `--only=memory,churn` runs some scenarios; `--autopipeline` turns on ioredis
 * auto-pipelining for the BullMQ and engine connections of both sides. Needs a Redis to itself: the
 * command and write counters (INFO commandstats, CONFIG RESETSTAT, the dirty
 * counter) and the memory figures are server-wide.
 */
import { execSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { client, closeClients, parseInfo } from './lib/redis';
import { table, type BenchContext, type ScenarioResult } from './lib/report';
import { log } from './lib/stats';
import { churn } from './scenarios/churn';
import { clearLoaded, clearScope } from './scenarios/clear-scope';
import { deferralCost } from './scenarios/deferral-cost';
import { happyIo, happyPath } from './scenarios/happy-path';
import { herd } from './scenarios/herd';
import { listPage } from './scenarios/list-page';
import { longBlock } from './scenarios/long-block';
import { memory } from './scenarios/memory';
import { replicaWait } from './scenarios/replica-wait';
import { resourceScale } from './scenarios/resource-scale';
import { suppressedTick } from './scenarios/suppressed-tick';
import { tickStorm } from './scenarios/tick-storm';
import { utilisation } from './scenarios/utilisation';
import { wakeScale } from './scenarios/wake-scale';

const SCENARIOS: Record<string, (ctx: BenchContext) => Promise<ScenarioResult>> = {
  'happy-path': happyPath,
  'happy-io': happyIo,
  deferral: deferralCost,
  suppressed: suppressedTick,
  'tick-storm': tickStorm,
  churn,
  memory,
  'clear-scope': clearScope,
  'clear-loaded': clearLoaded,
  herd,
  'replica-wait': replicaWait,
  'wake-scale': wakeScale,
  'resource-scale': resourceScale,
  utilisation,
  'long-block': longBlock,
  'list-page': listPage,
};

function version(pkg: string): string {
  return (require(`${pkg}/package.json`) as { version: string }).version;
}

function gitCommit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const only = args
    .find((a) => a.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',');
  const names = only ?? Object.keys(SCENARIOS);
  for (const n of names)
    if (!SCENARIOS[n]) throw new Error(`Unknown scenario ${n}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  const ctx: BenchContext = { quick, n: (full, small) => (quick ? small : full) };
  // ioredis auto-pipelining for every client the scenarios open (both sides of each comparison).
  if (args.includes('--autopipeline')) process.env.BENCH_AUTOPIPELINE = '1';

  const redis = client();
  const server = parseInfo(await redis.info('server'));
  const clients = parseInfo(await redis.info('clients'));
  const env = {
    date: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    autopipeline: args.includes('--autopipeline'),
    commit: gitCommit(),
    node: process.version,
    redis: server.redis_version,
    bullmq: version('bullmq'),
    ioredis: version('ioredis'),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    platform: `${os.platform()} ${os.release()}`,
    loadAverageAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
    redisClientsAtStart: Number(clients.connected_clients ?? 0),
  };
  const header = `Node ${env.node}, Redis ${env.redis}, BullMQ ${env.bullmq}, ioredis ${env.ioredis}; ${env.cpu}, ${env.cores} cores, ${env.memoryGiB} GiB; load ${env.loadAverageAtStart.join(' ')}; ${env.mode} run`;
  log(header);
  if (env.redisClientsAtStart > 1) {
    log(
      `warning: ${env.redisClientsAtStart - 1} other client(s) on this Redis; command, write and memory counts are server-wide`,
    );
  }

  const results: ScenarioResult[] = [];
  // a scenario that throws is reported (a row saying so, and the exit code) and the others still run
  const failed: string[] = [];
  const t0 = Date.now();
  for (const name of names) {
    log(`scenario ${name} ...`);
    const s = Date.now();
    try {
      results.push(await SCENARIOS[name]!(ctx));
      log(`scenario ${name} done in ${((Date.now() - s) / 1000).toFixed(1)} s`);
    } catch (error) {
      console.error(error);
      failed.push(name);
      const message = error instanceof Error ? error.message : String(error);
      results.push({
        name,
        rows: [{ scenario: name, measure: `failed: ${message}`, plugin: '', target: '', met: false }],
        details: { failed: message },
      });
    }
  }
  const seconds = (Date.now() - t0) / 1000;
  const rows = results.flatMap((r) => r.rows);
  const out = {
    env: { ...env, loadAverageAtEnd: os.loadavg().map((x) => Math.round(x * 100) / 100), seconds },
    rows,
    scenarios: Object.fromEntries(results.map((r) => [r.name, r.details])),
  };
  const file = path.join(__dirname, 'results', 'latest.json');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);

  process.stdout.write(`\n${header}; ${seconds.toFixed(0)} s\n\n${table(rows)}\n\n`);
  const missed = rows.filter((r) => r.met === false).length;
  process.stdout.write(
    `${missed === 0 ? 'Every target met.' : `${missed} target(s) missed.`} Details: ${path.relative(process.cwd(), file)}\n`,
  );
  await closeClients();
  if (failed.length > 0) {
    process.stdout.write(`Scenarios that failed: ${failed.join(', ')}\n`);
    process.exitCode = 1;
  }
}

main().catch(async (error: unknown) => {
  console.error(error);
  await closeClients();
  process.exit(1);
});
