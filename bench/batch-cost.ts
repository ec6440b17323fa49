/**
 * What the hot path's script costs Redis, alone (not part of `npm run bench`):
 *   REDIS_URL=... npx tsx bench/batch-cost.ts [rounds]
 * Runs `BATCH` as a busy worker sends it: each call carries `PER` begins of
 * fresh stages with no resource (jobs with BullMQ's lock) and the releases of
 * the call before's successes (stages that held nothing: release mode 'e'), and reads the calls' time from `INFO commandstats`
 * (Redis' own timing of the script, its inner commands included). Prints µs
 * per job (one begin and one release) for the script as it is and
 * for copies with one part cut out (`CUTS`): what each part costs. The copies
 * are for measuring only; each cut fails loudly if the script no longer holds
 * its text. The stats are server-wide: give it a Redis of its own.
 */
import type IORedis from 'ioredis';
import { BATCH } from '../src/lua/generated';
import { benchPrefix, client, closeClients, dropPrefix } from './lib/redis';
import { median } from './lib/stats';

/** Begins (and releases) a call: about what one call carries in a c50 drain here. */
const PER = 17;
const CALLS = 300;

/** One part of the script cut out: the text it removes, and what stands in its place. */
export const CUTS: Record<string, [from: string, to: string]> = {
  // the success's release past its GET (its DEL, the hand-on check)
  'the release after its GET': [
    "  redis.call('DEL', L)\n  local cancelled = 0",
    "  do return {0} end\n  redis.call('DEL', L)\n  local cancelled = 0",
  ],
  "the begin's SET of the lock (and so the release's work past its GET)": [
    "  if tied then\n    redis.call('SET', L, own .. '\\n' .. fence .. '\\n' .. bull, 'PX', lockMs)",
    '  if tied then',
  ],
  "the begin's HMGET of the job's fields": [
    "c = redis.call('HMGET', J, 'sdc', 'sds', 'atm', 'timestamp', 'finishedOn')",
    "c = {false, false, '0', '1', false}",
  ],
  "the begin's licence range": ['  local lic, failed = split(licences(IDX, sid))', '  local lic, failed = nil, {}'],
  "the release's hand-on check": ["  if mode == '1' or mode == 'e' then handedOn(token, stalled) end", ''],
};

/** The same call to a script that does nothing (what the bench's `floor` sends): the call's own cost. */
const NOOP = 'return {#ARGV}';

export function cut(from: string, to: string): string {
  if (!BATCH.includes(from)) throw new Error(`BATCH no longer holds the text this cut removes: ${from}`);
  return BATCH.split(from).join(to);
}

/** Redis' count and time of `EVALSHA` calls so far (`INFO commandstats`: a script's time includes its inner commands). */
async function evalshaStats(redis: IORedis): Promise<{ calls: number; usec: number }> {
  const line = (await redis.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha:'));
  const m = /calls=(\d+),usec=(\d+)/.exec(line ?? '');
  return { calls: Number(m?.[1] ?? 0), usec: Number(m?.[2] ?? 0) };
}

async function perJob(redis: IORedis, lua: string): Promise<number> {
  const noop = lua === NOOP;
  const prefix = benchPrefix('batch-cost');
  const base = `${prefix}:q:`;
  const sha = (await redis.script('LOAD', lua)) as string;
  const job = (i: number) => `book-${i}%2Fch@e.${i}`;
  const fill = redis.pipeline();
  for (let i = 0; i < PER * CALLS; i++) {
    const data = JSON.stringify({ v: 1, scope: [`book-${i}`, 'ch'], stage: 'image', payload: { n: 1 } });
    fill.hset(base + job(i), 'timestamp', 1, 'atm', 0, 'stc', 0, 'processedOn', 2, 'data', data);
    fill.set(`${base}${job(i)}:lock`, `tok${i}`);
  }
  await fill.exec();
  const before = await evalshaStats(redis);
  const locks: string[] = [];
  try {
    for (let c = 0; c < CALLS; c++) {
      const ops: (string | number)[] = [];
      if (c > 0)
        for (let i = (c - 1) * PER; i < c * PER; i++)
          ops.push('r', `book-${i}/ch/image`, job(i), locks[i]!, 'e', '1:0', '', '');
      for (let i = c * PER; i < (c + 1) * PER; i++)
        ops.push('b', `book-${i}/ch/image`, job(i), 30_000, '', 1000, `tok${i}`, '');
      const n = c > 0 ? 2 * PER : PER;
      const out = (await redis.evalsha(sha, 2, `${base}sd:licences`, `${base}sd:fence`, base, n, ...ops)) as unknown[];
      for (let k = 0; k < PER && !noop; k++) {
        const rec = out[n - PER + k];
        if (typeof rec !== 'string') throw new Error(`a begin did not take its lock: ${JSON.stringify(rec)}`);
        const i = c * PER + k;
        locks[i] = `${job(i)}\n${rec.split(',')[0]}\ntok${i}`;
      }
    }
    const after = await evalshaStats(redis);
    return (after.usec - before.usec) / (after.calls - before.calls) / PER;
  } finally {
    await dropPrefix(redis, prefix);
  }
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 3);
  const variants: [string, string][] = [
    ['BATCH as it is', BATCH],
    ...Object.entries(CUTS).map(([name, [from, to]]): [string, string] => [`without ${name}`, cut(from, to)]),
    ['a script that does nothing, the same arguments', NOOP],
  ];
  const redis = client();
  const got = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++)
    for (const [name, lua] of variants) got.set(name, [...(got.get(name) ?? []), await perJob(redis, lua)]);
  console.log(`Redis µs per job (a begin and a release), ${CALLS} calls of ${PER} jobs, medians of ${rounds} rounds:`);
  for (const [name, v] of got)
    console.log(`${median(v).toFixed(1).padStart(6)}  ${name}  (${v.map((x) => x.toFixed(1)).join(' ')})`);
  await closeClients();
}

// run as a script, not when a test imports its cuts
if (require.main === module) void main();
