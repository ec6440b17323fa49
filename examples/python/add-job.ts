/**
 * The Node half of examples/python/enqueue.py: reads the jobs it hands over
 * (one JSON line `{"add": {name, data, opts}}` each) from stdin and adds each
 * with BullMQ's own deduplicating `add`, as the engine's `enqueue` does.
 * Prints one JSON line per job: `{ added, jobId }` (`added: false`: a job of
 * the stage was waiting already, BullMQ's deduplication kept it).
 *
 *   /usr/bin/python3 examples/python/enqueue.py --scope book-1 --stage image \
 *     | npx tsx examples/python/add-job.ts --prefix bull --queue stage-dispatch
 *
 * REDIS_URL (default redis://127.0.0.1:6379) names the Redis. test/producers.python.test.ts runs it.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createInterface } from 'node:readline';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : (process.argv[i + 1] ?? fallback);
}

async function main() {
  const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const queue = new Queue(arg('queue', 'stage-dispatch'), { connection, prefix: arg('prefix', 'bull') });
  try {
    for await (const line of createInterface({ input: process.stdin })) {
      const handed = line.trim() ? (JSON.parse(line) as { add?: { name: string; data: unknown; opts: never } }) : {};
      if (!handed.add) continue;
      const { name, data, opts } = handed.add;
      const job = await queue.add(name, data, opts);
      console.log(JSON.stringify({ added: job.id === (opts as { jobId: string }).jobId, jobId: job.id }));
    }
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
