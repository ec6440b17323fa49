/**
 * `npm run demo`: a book of stages, a render farm with few slots, and a
 * producer that ticks. Runs the plugin, then the naive re-dispatching
 * scheduler on the same workload, and prints what the plugin saved.
 */
import { randomUUID } from 'node:crypto';
import IORedis from 'ioredis';
import { createDispatchEngine, type StageRef } from '../src';
import { NaiveScheduler } from './naive-scheduler';
import { book, key, RenderFarm } from './render-farm';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const TICK_MS = 100;
const SLOTS = 3;
const STAGES = book('book-1', 3, 4); // 24 stages
// each stage's render length, drawn once: both runs render the same work, so their drain
// times differ by how they schedule it, not by the dice. DEMO_SEED=<n> draws a run's lengths again
const SEED = Number(process.env.DEMO_SEED ?? Math.floor(Math.random() * 2 ** 31));
const LENGTHS = new Map(STAGES.map((ref, i) => [key(ref), 500 + Math.floor(unit(SEED, i) * 400)]));
const renderMs = (ref: StageRef) => {
  const ms = LENGTHS.get(key(ref));
  if (ms === undefined) throw new Error(`no render length for ${key(ref)}`);
  return ms;
};

/** The i-th number in [0, 1) of a seeded sequence (an integer hash of seed and i). */
function unit(seed: number, i: number): number {
  let h = Math.imul(seed ^ Math.imul(i + 1, 0x9e3779b1), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return ((h ^ (h >>> 16)) >>> 0) / 2 ** 32;
}

interface Run {
  name: string;
  executorCalls: number;
  deferrals: number;
  suppressed: number;
  journalEvents: number;
  ticks: number;
  drainMs: number;
}

let lastPlain = 0;
/** A live status line on a terminal; elsewhere (CI logs) the same line once a second. */
const live = (line: string) => {
  if (process.stdout.isTTY) process.stdout.write(`\r\x1b[2K${line}`);
  else if (line && Date.now() - lastPlain >= 1000) {
    lastPlain = Date.now();
    console.log(line);
  }
};

async function pluginRun(redis: IORedis): Promise<Run> {
  const prefix = `demo-${randomUUID().slice(0, 6)}`;
  const done = new Set<string>();
  // every stage needs the farm: one answer "no slot" closes its gate, and the stages behind it wait
  // in its line without asking. Capacity returns each time a render slot frees: the farm tells
  // the engine, which opens the gate and wakes the longest-waiting stage at once (its window is
  // only the safety net)
  let signal = () => undefined as unknown;
  let lastDone = 0;
  const farm = new RenderFarm(SLOTS, renderMs, (ref) => {
    done.add(key(ref));
    lastDone = Date.now();
    signal();
  });
  let journalEvents = 0;
  let suppressed = 0;
  const engine = createDispatchEngine({
    connection: { host: redis.options.host, port: redis.options.port, password: redis.options.password },
    prefix,
    executor: farm.executor,
    resourceOf: () => 'render-farm',
    journal: async () => {
      journalEvents++;
    },
    // only the safety net now (a freed slot wakes a stage at once): 10 s, doubling up to 60 s
    windows: { capacitySeconds: 10, capacityMaxSeconds: 60, jitter: 0.2 },
  });
  signal = () => engine.wakeDeferred({ resource: 'render-farm', limit: 1 }).catch(() => undefined);
  engine.on('suppressed', () => suppressed++);
  engine.createWorker({ concurrency: 4 });
  const dispatched = new Set<string>();
  engine.on('dispatched', ({ ref }) => dispatched.add(key(ref)));
  const started = Date.now();
  let ticks = 0;
  // Both runs stop the clock at the same point: the last render's end (not the tick that sees it).
  let drainMs = 0;
  try {
    while (done.size < STAGES.length) {
      ticks++;
      for (const ref of STAGES) if (!dispatched.has(key(ref))) await engine.enqueue(ref, { book: 'book-1' });
      const deferred = (await engine.listDeferred(['book-1'])).length;
      live(
        `plugin  tick ${ticks}  done ${done.size}/${STAGES.length}  deferred now ${deferred}  executor calls ${farm.executorCalls}  suppressed ticks ${suppressed}`,
      );
      await new Promise((r) => setTimeout(r, TICK_MS));
    }
    drainMs = lastDone - started;
  } finally {
    await engine.close();
    await dropPrefix(redis, prefix);
  }
  live('');
  return {
    name: 'plugin',
    executorCalls: farm.executorCalls,
    deferrals: journalEvents,
    suppressed,
    journalEvents,
    ticks,
    drainMs,
  };
}

async function naiveRun(redis: IORedis): Promise<Run> {
  const ns = `demo-naive-${randomUUID().slice(0, 6)}`;
  const done = new Set<string>();
  const dispatched = new Set<string>();
  let lastDone = 0;
  const farm = new RenderFarm(SLOTS, renderMs, (ref) => {
    done.add(key(ref));
    lastDone = Date.now();
  });
  const scheduler = new NaiveScheduler(redis, ns, farm);
  const original = farm.executor;
  const tracked = async (ref: (typeof STAGES)[number]) => {
    const r = await original(ref);
    if (r.dispatched) dispatched.add(key(ref));
    return r;
  };
  (farm as { executor: typeof tracked }).executor = tracked;
  const started = Date.now();
  let ticks = 0;
  let drainMs = 0;
  try {
    while (done.size < STAGES.length) {
      ticks++;
      await scheduler.tick(STAGES.filter((ref) => !dispatched.has(key(ref))));
      live(
        `naive   tick ${ticks}  done ${done.size}/${STAGES.length}  executor calls ${farm.executorCalls}  journal events ${scheduler.journalEvents}`,
      );
      await new Promise((r) => setTimeout(r, TICK_MS));
    }
    drainMs = lastDone - started;
  } finally {
    await dropPrefix(redis, ns);
  }
  live('');
  return {
    name: 'naive',
    executorCalls: farm.executorCalls,
    deferrals: 0,
    suppressed: 0,
    journalEvents: scheduler.journalEvents,
    ticks,
    drainMs,
  };
}

async function dropPrefix(redis: IORedis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

async function main() {
  const redis = new IORedis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
  } catch {
    console.error(
      `No Redis at ${REDIS_URL}: run \`npm run demo\` (it starts a private redis-server) or set REDIS_URL.`,
    );
    process.exit(1);
  }
  console.log(
    `${STAGES.length} stages, ${SLOTS} render slots, a producer ticking every ${TICK_MS} ms (Redis ${REDIS_URL}; render lengths: DEMO_SEED=${SEED})\n`,
  );
  const plugin = await pluginRun(redis);
  const naive = await naiveRun(redis);
  await redis.quit();
  const rows: [string, keyof Run][] = [
    ['executor calls', 'executorCalls'],
    ['journal events', 'journalEvents'],
    ['deferrals', 'deferrals'],
    ['suppressed ticks (no side effect)', 'suppressed'],
    ['producer ticks', 'ticks'],
    ['time to drain (ms)', 'drainMs'],
  ];
  console.log('| measure | plugin | naive scheduler |');
  console.log('| --- | ---: | ---: |');
  for (const [label, k] of rows) console.log(`| ${label} | ${plugin[k]} | ${naive[k]} |`);
  const ratio = (a: number, b: number) => (b === 0 ? 'n/a' : (a / b).toFixed(1));
  console.log(
    `\nThe naive scheduler made ${ratio(naive.executorCalls, plugin.executorCalls)}x the executor calls and ${ratio(naive.journalEvents, plugin.journalEvents)}x the journal events.`,
  );
  const drain = plugin.drainMs / naive.drainMs;
  const perStage = plugin.executorCalls / STAGES.length;
  console.log(
    `The plugin made ${perStage.toFixed(2)} executor calls per stage and drained in ${drain.toFixed(2)} of the naive scheduler's time.`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
