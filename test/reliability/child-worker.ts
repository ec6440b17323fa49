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
 *   CHECK_OVERLAP=1              record two executor calls of one stage at once
 */
import IORedis from 'ioredis';
import { createDispatchEngine } from '../../src/engine';
import type { FaultPoint } from '../../src/options';
import { stageId } from '../../src/stage-ref';
import { FLEET_ENGINE_OPTIONS, answer, rng, type Outcome } from './harness';

const env = process.env;
const url = new URL(env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const rec = new IORedis(env.REC_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const R = env.REC as string;
const seed = Number(env.SEED ?? 1);
const faultPoint = env.FAULT_POINT ?? '';
const faultRate = Number(env.FAULT_RATE ?? 0);
const checkOverlap = env.CHECK_OVERLAP === '1';
const pid = process.pid;

/** A number in [0,1) from the seed and a string. */
function hash(s: string): number {
  let h = seed >>> 0;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 2654435761) >>> 0;
  return rng(h)();
}

/** The stage answers `dispatched` from its K-th call on; before that, a seeded mix. */
export function scripted(sid: string, n: number): Outcome {
  const k = 1 + Math.floor(hash(`k|${sid}`) * 5);
  if (n >= k) return 'dispatched';
  const x = hash(`o|${sid}|${n}`);
  return x < 0.5 ? 'capacity' : x < 0.75 ? 'idempotent' : 'failure';
}

const random = rng(seed ^ pid);

async function fault(point: FaultPoint, sid: string) {
  if (point === 'lock-taken') await rec.sadd(`${R}:open:${pid}`, sid);
  if ((faultPoint === point || faultPoint === 'any') && random() < faultRate) {
    await rec.multi().incr(`${R}:kills:${point}`).sadd(`${R}:killed-open`, sid).exec();
    process.kill(pid, 'SIGKILL');
    await new Promise(() => undefined);
  }
}

const engine = createDispatchEngine({
  connection: { host: url.hostname, port: Number(url.port || 6379) },
  prefix: env.PREFIX as string,
  queueName: env.QUEUE as string,
  executor: async (ref) => {
    const sid = stageId(ref);
    const n = await rec.incr(`${R}:n:${sid}`);
    if (checkOverlap && (await rec.incr(`${R}:run:${sid}`)) > 1) await rec.rpush(`${R}:violations`, `overlap ${sid} call ${n}`);
    const outcome = scripted(sid, n);
    await rec.rpush(`${R}:log:${sid}`, `${Date.now()}|${n}|${outcome}|${pid}`);
    await new Promise((r) => setTimeout(r, Math.floor(random() * 4)));
    if (checkOverlap) await rec.decr(`${R}:run:${sid}`);
    return answer(outcome);
  },
  journal: async (ref, event) => {
    await rec.rpush(`${R}:win:${stageId(ref)}`, `${Date.now()}|${event.until}|${event.wakeUpJobId}`);
  },
  ...FLEET_ENGINE_OPTIONS,
  faultHook: (point, ref) => fault(point, stageId(ref)),
});

const worker = engine.createWorker({
  concurrency: Number(env.CONCURRENCY ?? 10),
  lockDuration: 1000,
  stalledInterval: 500,
  maxStalledCount: 1_000_000,
});
const closeOpen = (job: { data?: { scope?: string[]; stage?: string } } | undefined) => {
  if (job?.data?.scope && job.data.stage) {
    rec.srem(`${R}:open:${pid}`, stageId({ scope: job.data.scope, stage: job.data.stage })).catch(() => undefined);
  }
};
worker.on('completed', closeOpen);
worker.on('failed', closeOpen);
worker.on('error', () => undefined); // connection errors while Redis restarts: the worker reconnects
worker.waitUntilReady().then(() => process.stdout.write('ready\n'));

process.on('SIGTERM', () => {
  void engine
    .close()
    .then(() => rec.quit())
    .finally(() => process.exit(0));
});
