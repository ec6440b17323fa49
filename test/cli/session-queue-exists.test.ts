import { Queue } from 'bullmq';
import { dispatchJobData } from '../../src/job-data';
import { withSession, type GlobalOptions } from '../../src/cli/session';
import { UsageError } from '../../src/cli/errors';
import { client, closeClients, dropPrefix, isolated } from '../helpers/redis';
import { REDIS_URL } from './run';

/**
 * The CLI opens a queue only when BullMQ's `meta` key of it exists (src/cli/session.ts), run in
 * process so that mutation testing sees it (cli.test.ts runs the built binary).
 */
const q = isolated();
let queue: Queue;

beforeAll(async () => {
  queue = new Queue(q.queueName, { connection: client(), prefix: q.prefix });
  await queue.add('image', dispatchJobData({ scope: ['book-1'], stage: 'image' }, {}, undefined), { jobId: 'x' });
});

afterAll(async () => {
  await queue.close();
  await dropPrefix(client(), q.prefix);
  await closeClients();
});

const options = (queueName: string): GlobalOptions => ({
  redis: REDIS_URL,
  queue: queueName,
  prefix: q.prefix,
  json: true,
  cluster: false,
  timeout: 5000,
});

describe('C29: the CLI opens an existing queue only', () => {
  it('C29: a queue BullMQ made opens', async () => {
    await expect(withSession(options(q.queueName), async () => 'opened')).resolves.toBe('opened');
  });

  it('C29: a mistyped queue name is refused with its name and prefix', async () => {
    const refused = withSession(options(`${q.queueName}-typo`), async () => 'opened');
    await expect(refused).rejects.toBeInstanceOf(UsageError);
    await expect(refused).rejects.toMatchObject({
      message: expect.stringContaining(`No BullMQ queue "${q.queueName}-typo"`),
    });
  });
});
