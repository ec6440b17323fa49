/**
 * A worker process for the scale-out tests (run with `node --import tsx`).
 * argv[2] is a JSON `WorkerProcessConfig`. It opens one engine and one Worker
 * per queue on the cluster, and reports every executor call and every
 * deferral to the parent over IPC. On `{ type: 'stop' }` it closes and exits.
 *
 * A stage answers `no_worker_available` to its first `capacityCalls` calls (in
 * the payload), then dispatches. Calls are counted in a standalone Redis (the
 * tests' usual one), outside the cluster, so a failover cannot lose the count.
 * A stage whose payload names a `resource` needs it (the engine's `resourceOf`,
 * C31's gates): its capacity answers close that resource's gate.
 */
import IORedis, { Cluster } from 'ioredis';
import { createDispatchEngine, type DispatchEngine, type StageRef } from '../../src';
import { FAILOVER_TOLERANT } from './harness';

export interface WorkerProcessConfig {
  startupNodes: { host: string; port: number }[];
  queues: { prefix: string; queueName: string }[];
  concurrency: number;
  capacitySeconds: number;
  jitter: number;
  /** Engine lock and BullMQ lock, ms: how soon work held by a lost write is picked up again. */
  lockMs: number;
  /** `false` turns the engine's `waitForReplicas` off (a control run); `true` keeps the Cluster default. */
  waitForReplicas: boolean;
  /** Standalone Redis holding the per-stage call counters, and their key prefix. */
  counter: { host: string; port: number; password?: string; prefix: string };
}

export interface StagePayload {
  capacityCalls: number;
  /** The resource the stage needs (`resourceOf`); none: it reads no gate. */
  resource?: string;
}

export type WorkerEvent =
  | { type: 'ready'; pid: number }
  | { type: 'call'; pid: number; queue: string; key: string; start: number; end: number; sent: boolean }
  | { type: 'deferred'; pid: number; queue: string; key: string; until: number; wakeUpJobId: string; reason: string }
  /** A success woke the deferral of wake-up `jobId` early from its resource's line, at `at` (before its promotion). */
  | { type: 'woken'; pid: number; jobId: string; at: number }
  | { type: 'lag'; pid: number; queue: string; acked: number }
  | { type: 'error'; pid: number; message: string };

const config = JSON.parse(process.argv[2] as string) as WorkerProcessConfig;
const send = (e: WorkerEvent) => process.send?.(e);
const keyOf = (ref: StageRef) => `${ref.scope.join('/')}/${ref.stage}`;

const counter = new IORedis({
  host: config.counter.host,
  port: config.counter.port,
  password: config.counter.password,
});
const cluster = new Cluster(config.startupNodes, {
  ...FAILOVER_TOLERANT,
  redisOptions: { maxRetriesPerRequest: null },
});
cluster.on('error', () => undefined);

const engines: DispatchEngine<StagePayload>[] = config.queues.map(({ prefix, queueName }) => {
  const queue = `${prefix}:${queueName}`;
  // by hand, not harness(): a child process (no jest) on the private cluster
  const engine = createDispatchEngine<StagePayload>({
    connection: cluster,
    prefix,
    queueName,
    windows: { capacitySeconds: config.capacitySeconds, jitter: config.jitter },
    lockMs: config.lockMs,
    inFlightRetryMs: 200,
    ...(config.waitForReplicas ? {} : { waitForReplicas: false as const }),
    limits: { maxCapacityDeferrals: 1000 },
    retry: { attempts: 50, backoff: { type: 'fixed', delay: 200 } },
    resourceOf: (_ref, payload) => payload.resource,
    executor: async (ref, payload) => {
      const start = Date.now();
      // a little work, so attempts of different stages overlap
      await new Promise((r) => setTimeout(r, Math.random() * 10));
      const n = await counter.incr(`${config.counter.prefix}:${queue}|${keyOf(ref)}`);
      const sent = n > payload.capacityCalls;
      const end = Date.now();
      send({ type: 'call', pid: process.pid, queue, key: keyOf(ref), start, end, sent });
      return sent
        ? { dispatched: true, jobs: 1, reason: null }
        : { dispatched: false, jobs: 0, reason: 'no_worker_available' };
    },
    journal: async (ref, event) => {
      send({
        type: 'deferred',
        pid: process.pid,
        queue,
        key: keyOf(ref),
        until: event.until,
        wakeUpJobId: event.wakeUpJobId,
        reason: event.reason,
      });
    },
  });
  engine.on('woken', (e) => {
    if (e.early) send({ type: 'woken', pid: process.pid, jobId: e.jobId, at: Date.now() });
  });
  engine.on('replicaLag', (e) => send({ type: 'lag', pid: process.pid, queue, acked: e.acked }));
  const worker = engine.createWorker({
    concurrency: config.concurrency,
    lockDuration: config.lockMs,
    stalledInterval: Math.max(500, Math.floor(config.lockMs / 2)),
    maxStalledCount: 100,
  });
  worker.on('error', (e) => send({ type: 'error', pid: process.pid, message: `worker: ${e.message}` }));
  worker.on('failed', (job, e) =>
    send({ type: 'error', pid: process.pid, message: `job ${job?.id} failed: ${e.message}` }),
  );
  return engine;
});

async function main() {
  await Promise.all(engines.map((e) => e.queue.waitUntilReady()));
  send({ type: 'ready', pid: process.pid });
}

process.on('message', (m: { type: string }) => {
  if (m.type !== 'stop') return;
  void (async () => {
    await Promise.all(engines.map((e) => e.close()));
    await cluster.quit().catch(() => cluster.disconnect());
    await counter.quit().catch(() => counter.disconnect());
    process.exit(0);
  })();
});

main().catch((e) => {
  send({ type: 'error', pid: process.pid, message: String(e) });
  process.exit(1);
});
