import { Queue } from 'bullmq';
import { join } from 'node:path';
import { ROOT, runToExit } from '../../helpers/process';
import { client, closeClients, connect, dropPrefix, isolated, redisOptions } from '../../helpers/redis';

/** A Nest app's process, sent SIGTERM while a dispatch runs (`app.enableShutdownHooks()`). */
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const DEADLINE_MS = 20_000;

describe('C26: SIGTERM to a Nest app', () => {
  const { prefix, queueName } = isolated();
  let queue: Queue | undefined;
  afterAll(async () => {
    await queue?.close();
    await dropPrefix(client(), prefix);
    await closeClients();
  });

  it(
    'SIGTERM while a dispatch runs: Nest closes the Worker and the engine, the job ends delayed with no attempt spent, the process ends by the signal',
    async () => {
      const o = redisOptions();
      const r = await runToExit(
        TSX,
        [join(__dirname, 'fixtures', 'nest-child.ts')],
        { REDIS_URL: `redis://${o.host}:${o.port}`, PREFIX: prefix, QUEUE: queueName },
        DEADLINE_MS,
      );
      // Nest sends the signal again once app.close() has ended (tsx, the parent, reports it as 128 + 15)
      expect({ timedOut: r.timedOut, code: r.code }).toEqual({ timedOut: false, code: 143 });
      expect(r.out).toMatch(/executor started\n(.*\n)*executor aborted/);
      const jobId = /^enqueued (\S+)$/m.exec(r.out)?.[1];
      expect(jobId).toMatch(/^book-1\/image@r\./);
      queue = new Queue(queueName, { connection: connect(), prefix });
      expect(await queue.getJobState(jobId!)).toBe('delayed');
      expect((await queue.getJob(jobId!))?.attemptsMade).toBe(0);
    },
    DEADLINE_MS + 10_000,
  );
});
