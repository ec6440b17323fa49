/**
 * Registering the plugin in an existing BullMQ setup: your connection, your
 * prefix, your own Worker. (Type-checked with the project; run it with
 * `npx tsx examples/existing-setup.ts` against a local Redis. It exits by
 * itself after about two seconds: test/examples.test.ts checks that.)
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { createDispatchEngine } from '../src';

async function main() {
  // Your producer connection; it need not have maxRetriesPerRequest: null.
  const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

  const engine = createDispatchEngine<{ sceneUrl: string }>({
    connection,
    prefix: 'myapp', // your BullMQ prefix: every key the engine writes starts with it
    queueName: 'stage-dispatch',
    executor: async (ref, payload) => {
      // try to hand the stage to a render worker; say why if none could take it
      const sent = Math.random() < 0.5;
      console.log('dispatching', ref, payload.sceneUrl, sent ? 'sent' : 'no slot');
      return sent
        ? { dispatched: true, jobs: 1, reason: null }
        : { dispatched: false, jobs: 0, reason: 'no_worker_available' };
    },
    rollback: async (ref, reason) => console.log('back to PENDING', ref.stage, reason),
    journal: async (ref, event) =>
      console.log('journal', event.type, event.reason, new Date(event.until).toISOString()),
  });

  // Your own Worker, with the engine's processor (a Worker needs maxRetriesPerRequest: null).
  // Keep the duplicate in a variable: a Worker never closes a connection it was given.
  const workerConnection = connection.duplicate({ maxRetriesPerRequest: null });
  const worker = new Worker('stage-dispatch', engine.processor, {
    connection: workerConnection,
    prefix: 'myapp',
    concurrency: 10,
  });
  // Records the jobs BullMQ fails by itself (stalled past maxStalledCount), as createWorker's do.
  engine.attachWorker(worker);

  // A producer tick: enqueue is a no-op (no write) while the stage is deferred.
  const ref = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
  console.log(await engine.enqueue(ref, { sceneUrl: 's3://scenes/7' }));

  await new Promise((r) => setTimeout(r, 2000));

  // Shut down cleanly (README, "Shut down cleanly"): your Workers first (they
  // finish their running jobs), then the engine (it waits for its running
  // attempts), then every connection you opened, the Worker's duplicate too.
  // Any connection left open keeps the process alive.
  await worker.close();
  await engine.close(); // closes what the engine opened, never `connection`
  await workerConnection.quit();
  await connection.quit();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
