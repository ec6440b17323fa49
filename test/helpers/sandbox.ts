import { join } from 'node:path';
import { Worker, type WorkerOptions } from 'bullmq';
import { harness } from './engine';
import { fast, watch } from './jobs';
import { client } from './redis';

/**
 * BullMQ's sandboxed processors: a Worker given the processor's file runs each job in a child
 * process, or with `useWorkerThreads` in a worker thread. The file (test/fixtures/sandbox-processor.ts)
 * opens an engine of its own on the job's queue and runs its processor, as README's recipe says.
 */
export const SANDBOXES = [
  ['a child process', false],
  ['a worker thread', true],
] as const;

const FILE = join(__dirname, '..', 'fixtures', 'sandbox-processor.cjs');

/**
 * A sandboxed Worker on a fresh queue, attached to a producer-only engine of this process (the
 * parent needs no executor: the child's engine runs it). Its jobs get the fixture's budget (2
 * attempts, 10 ms apart): an enqueued job carries the enqueueing engine's. `calls()`: the child executor's calls,
 * `<stage>:<mode>` each. `inSandbox` closes the Worker (the harness's teardown, the engine).
 */
export function sandboxed(useWorkerThreads: boolean, opts: Partial<WorkerOptions> = {}) {
  const h = harness({ executor: undefined, retry: { attempts: 2, backoff: fast } });
  const worker = new Worker(h.queueName, FILE, {
    connection: client({ maxRetriesPerRequest: null }),
    prefix: h.prefix,
    useWorkerThreads,
    ...opts,
  });
  worker.on('error', () => undefined);
  h.engine.attachWorker(worker);
  const calls = () => h.redis.lrange(`${h.prefix}:test:calls`, 0, -1);
  return { h, worker, calls, ...watch(worker) };
}

/** Runs `test` on a fresh sandboxed Worker (see {@link sandboxed}), then closes the Worker. */
export async function inSandbox(
  useWorkerThreads: boolean,
  test: (s: ReturnType<typeof sandboxed>) => Promise<void>,
  opts: Partial<WorkerOptions> = {},
): Promise<void> {
  const s = sandboxed(useWorkerThreads, opts);
  try {
    await test(s);
  } finally {
    await s.worker.close();
  }
}
