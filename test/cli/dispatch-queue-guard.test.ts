import { Queue } from 'bullmq';
import { dispatchJobData } from '../../src/job-data';
import { checkDispatchQueue } from '../../src/cli/guard';
import { UsageError } from '../../src/cli/errors';
import { ioReader, QueueKeys } from '../../src/store/reader';
import { client, closeClients, dropPrefix, isolated } from '../helpers/redis';

/**
 * The check `clear` and `cancel` make before writing (src/cli/guard.ts), run in process so that
 * mutation testing sees it (hardening.test.ts runs the built binary): a queue whose jobs are none
 * of the engine's is refused, one holding a dispatch job's data passes, whatever its ids.
 */
const prefixes: string[] = [];
const queues: Queue[] = [];

async function queueWith(name: string, data: unknown, jobId: string) {
  const q = isolated();
  prefixes.push(q.prefix);
  const queue = new Queue(q.queueName, { connection: client(), prefix: q.prefix });
  queues.push(queue);
  await queue.add(name, data, { jobId });
  return { check: () => checkDispatchQueue(ioReader(client()), new QueueKeys(q.prefix, q.queueName), 'here') };
}

afterAll(async () => {
  for (const q of queues) await q.close();
  for (const p of prefixes) await dropPrefix(client(), p);
  await closeClients();
});

describe('C29: clear and cancel check the queue is a dispatch queue first', () => {
  it('a queue of other jobs only (no licence index, no dispatch job data) is refused as not a dispatch queue', async () => {
    const { check } = await queueWith('order', { n: 123 }, 'order-123');
    await expect(check()).rejects.toThrow(UsageError);
    await expect(check()).rejects.toThrow(/^Not a dispatch queue \(here\)/);
  });

  it('a queue holding a dispatch job under an id of its own (no licence index yet) is a dispatch queue', async () => {
    const { check } = await queueWith(
      'image',
      dispatchJobData({ scope: ['book-1'], stage: 'image' }, {}, undefined),
      'legacy-1',
    );
    await expect(check()).resolves.toBeUndefined();
  });
});
