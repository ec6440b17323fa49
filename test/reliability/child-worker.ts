/**
 * A worker process for the fleet tests: one dispatch engine and one Worker,
 * with a scripted executor whose answers are a pure function of (seed, stage,
 * call number). Everything it observes is recorded in a second Redis (the
 * record store, `REC_URL`) under `REC`, so it survives this process being
 * SIGKILLed and the engine's Redis being restarted.
 *
 * Run with `node --import tsx test/reliability/child-worker.ts`. Environment:
 *   REDIS_URL, PREFIX, QUEUE     the engine's Redis and queue
 *   REC_URL, REC                 the record store and its key prefix
 *   SEED, CONCURRENCY
 *   FAULT_POINT, FAULT_RATE      kill this process (SIGKILL) at that fault point
 *                                with that probability ('any' = every point)
 *   FAULT_PLAN, FAULT_ROUNDS     deliberate kills: the i-th process started kills
 *                                itself at point PLAN[i % len] (after a random
 *                                number of passes), for the first len x ROUNDS
 *   WORKER_LOCK_MS               BullMQ lockDuration (default 1000)
 *   EXEC_MS                      an executor call takes up to this long (default 4); it
 *                                stops at once when its signal aborts (a close, a cancel)
 *   TERMINAL_RATE                chance that a call before the stage's K-th fails for good
 *                                (UnrecoverableError): the job waits for a retry by hand
 *   RESOURCES                    stages need one of this many resources (`r0`, `r1`, …; by a
 *                                hash of the stage): capacity answers close their gate (C31)
 *
 * The executor stands for a downstream that honours `ctx.fencingToken`: every
 * call records its start and end (with the token, in Redis order: `exec:<sid>`),
 * and a `dispatched` answer is committed only if no call with a newer token
 * has started meanwhile (else the downstream refuses it: `stale`). The commit,
 * the end and the call's log line are one script: what is logged happened.
 */
import { UnrecoverableError } from 'bullmq';
import IORedis from 'ioredis';
import { createDispatchEngine } from '../../src/engine';
import type { FaultPoint } from '../../src/options';
import { stageId, stageIdOfJobId } from '../../src/stage-ref';
import { redisOptions } from '../helpers/redis';
import { FLEET_ENGINE_OPTIONS, answer, rng, type Outcome } from './harness';

const env = process.env;
// the tests' Redis (REDIS_URL, see helpers/redis.ts); the record on REC_URL, else on that Redis too
const rec = env.REC_URL
  ? new IORedis(env.REC_URL, { maxRetriesPerRequest: null })
  : new IORedis({ ...redisOptions(), maxRetriesPerRequest: null });
const R = env.REC as string;
const seed = Number(env.SEED ?? 1);
const faultPoint = env.FAULT_POINT ?? '';
const faultRate = Number(env.FAULT_RATE ?? 0);
const execMs = Number(env.EXEC_MS ?? 4);
const terminalRate = Number(env.TERMINAL_RATE ?? 0);
const resources = Number(env.RESOURCES ?? 0);
const pid = process.pid;

/** A number in [0,1) from the seed and a string. */
function hash(s: string): number {
  let h = seed >>> 0;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 2654435761) >>> 0;
  return rng(h)();
}

/** The stage answers `dispatched` from its K-th call on; before that, a seeded mix (with TERMINAL_RATE, failures for good). */
export function scripted(sid: string, n: number): Outcome | 'terminal' {
  const k = 1 + Math.floor(hash(`k|${sid}`) * 5);
  if (n >= k) return 'dispatched';
  if (terminalRate > 0 && hash(`t|${sid}|${n}`) < terminalRate) return 'terminal';
  const x = hash(`o|${sid}|${n}`);
  return x < 0.5 ? 'capacity' : x < 0.75 ? 'idempotent' : 'failure';
}

const random = rng(seed ^ pid);

const plan = (env.FAULT_PLAN ?? '').split(',').filter(Boolean);
const planned: Promise<{ point: string; skip: number } | null> =
  plan.length === 0
    ? Promise.resolve(null)
    : rec
        .incr(`${R}:incarnation`)
        .then((i) =>
          i <= plan.length * Number(env.FAULT_ROUNDS ?? 1)
            ? { point: plan[(i - 1) % plan.length]!, skip: Math.floor(random() * 20) }
            : null,
        );

let dying = false;

async function fault(point: FaultPoint, sid: string) {
  if (point === 'lock-taken') await rec.sadd(`${R}:open:${pid}`, sid);
  const target = await planned;
  let die = (faultPoint === point || faultPoint === 'any') && random() < faultRate;
  if (target && target.point === point && target.skip-- <= 0) die = true;
  if (die && !dying) {
    dying = true; // other attempts of this process may reach a fault point before the kill lands
    await rec.multi().incr(`${R}:kills:${point}`).sadd(`${R}:killed-open`, sid).exec();
    process.kill(pid, 'SIGKILL');
    await new Promise(() => undefined);
  }
}

/** A call starts: KEYS fence, exec list, seq; ARGV token, pid. The newest token started is kept. */
const START = `
local f = tonumber(ARGV[1])
if f > tonumber(redis.call('GET', KEYS[1]) or '0') then redis.call('SET', KEYS[1], f) end
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[2], 's|' .. redis.call('INCR', KEYS[3]) .. '|' .. f .. '|' .. ARGV[2] .. '|' .. (t[1] * 1000 + math.floor(t[2] / 1000)))
return 1`;
/**
 * A call ends: KEYS fence, exec list, seq, log, dispatched set; ARGV token, pid,
 * outcome, sid, start ms, call number. A `dispatched` answer whose token is
 * older than the newest started is refused (`stale`). Returns the outcome.
 */
const END = `
local f = tonumber(ARGV[1])
local kind = ARGV[3]
if kind == 'dispatched' then
  if f < tonumber(redis.call('GET', KEYS[1]) or '0') then kind = 'stale' else redis.call('SADD', KEYS[5], ARGV[4]) end
end
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[2], 'e|' .. redis.call('INCR', KEYS[3]) .. '|' .. f .. '|' .. ARGV[2] .. '|' .. (t[1] * 1000 + math.floor(t[2] / 1000)) .. '|' .. kind)
redis.call('RPUSH', KEYS[4], ARGV[5] .. '|' .. ARGV[6] .. '|' .. kind .. '|' .. ARGV[2])
return kind`;

/** Waits up to `ms`; resolves true at once if `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(true);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(false);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

// by hand, not harness(): a child process (no jest), its answers a seeded function shared by every worker process
const engine = createDispatchEngine<unknown, string>({
  connection: redisOptions(),
  prefix: env.PREFIX as string,
  queueName: env.QUEUE as string,
  executor: async (ref, _payload, ctx) => {
    const sid = stageId(ref);
    const n = await rec.incr(`${R}:n:${sid}`);
    const t0 = Date.now();
    const keys = [`${R}:fence:${sid}`, `${R}:exec:${sid}`, `${R}:seq`];
    await rec.eval(START, 3, ...keys, ctx.fencingToken, pid);
    const outcome = scripted(sid, n);
    const aborted = await pause(Math.floor(random() * execMs), ctx.signal);
    // close() aborts with an EngineClosedError (ENGINE_CLOSED); a cancel or a lost lock with an AbortError `by`
    const reason = ctx.signal.reason as { by?: string; code?: string } | undefined;
    const by = reason?.code === 'ENGINE_CLOSED' ? 'close' : (reason?.by ?? 'abort');
    const kind = (await rec.eval(
      END,
      5,
      ...keys,
      `${R}:log:${sid}`,
      `${R}:dispatched`,
      ctx.fencingToken,
      pid,
      aborted ? `aborted-${by}` : outcome,
      sid,
      t0,
      n,
    )) as string;
    if (aborted) throw ctx.signal.reason ?? new Error('aborted');
    if (kind === 'stale')
      throw new Error(`the downstream refused fencing token ${ctx.fencingToken}: a newer one started`);
    if (outcome === 'terminal') throw new UnrecoverableError('the downstream refused this stage for good');
    return answer(outcome);
  },
  journal: async (ref, event) => {
    await rec.rpush(`${R}:win:${stageId(ref)}`, `${Date.now()}|${event.until}|${event.wakeUpJobId}|${event.reason}`);
  },
  ...FLEET_ENGINE_OPTIONS,
  ...(resources > 0 && { resourceOf: (ref) => `r${Math.floor(hash(`r|${stageId(ref)}`) * resources)}` }),
  faultHook: (point, ref) => fault(point, stageId(ref)),
});

engine.queue.on('error', () => undefined); // while Redis restarts
// a success that woke stages of its resource's line ended their windows: emitted before their wake-ups are
// promoted, so a woken stage's call starts after this time (the parent's check excuses calls from it on)
engine.on('woken', (e) => {
  if (e.early) rec.hsetnx(`${R}:woken`, e.jobId, Date.now()).catch(() => undefined);
});

const worker = engine.createWorker({
  concurrency: Number(env.CONCURRENCY ?? 10),
  // short, so a killed worker's jobs come back fast; the no-crash test uses BullMQ's default
  lockDuration: Number(env.WORKER_LOCK_MS ?? 1000),
  stalledInterval: Math.max(500, Number(env.WORKER_LOCK_MS ?? 1000) / 2),
  maxStalledCount: 1_000_000,
});
const closeOpen = (job: { data?: { scope?: string[]; stage?: string } } | undefined) => {
  if (job?.data?.scope && job.data.stage) {
    rec.srem(`${R}:open:${pid}`, stageId({ scope: job.data.scope, stage: job.data.stage })).catch(() => undefined);
  }
};
worker.on('completed', closeOpen);
worker.on('failed', closeOpen);
// a job redelivered by BullMQ's stalled check (its lock expired: killed, or starved past lockDuration)
worker.on('stalled', (jobId: string) => {
  rec.sadd(`${R}:stalled`, stageIdOfJobId(jobId)).catch(() => undefined);
});
worker.on('error', () => undefined); // connection errors while Redis restarts: the worker reconnects
worker.waitUntilReady().then(() => process.stdout.write('ready\n'));

// a graceful stop: close() aborts the running executors (their jobs go back, no attempt spent), then exit
process.on('SIGTERM', () => {
  void engine
    .close()
    .then(() => rec.quit())
    .finally(() => process.exit(0));
});
