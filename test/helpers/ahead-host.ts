/**
 * Host A of test/contract/C4-windows/idle-lead-expires.test.ts: a process whose clock runs ahead (preload
 * clock-ahead.cjs) with a dispatch engine on the test's queue and a Worker, not started (the test's
 * own Worker fetches by A's clock): it runs no attempt, its lead is all it says (a host that runs
 * no Worker records none). Prints `ready` once its engine is ready; runs until killed.
 * Environment: REDIS_URL, PREFIX, QUEUE.
 */
import { createDispatchEngine } from '../../src/engine';

const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const engine = createDispatchEngine({
  connection: { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null },
  prefix: process.env.PREFIX!,
  queueName: process.env.QUEUE!,
  executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
});
engine.createWorker({ autorun: false });
void engine.waitUntilReady().then(() => console.log('ready'));
setInterval(() => undefined, 1 << 30);
