import type IORedis from 'ioredis';
import { client, closeClients, dropPrefix, isolated, waitFor } from '../../helpers/redis';
import { ManualWorker, countingEngine } from '../../reliability/harness';

let redis: IORedis;
beforeAll(() => {
  redis = client();
});
afterAll(closeClients);

/** Closes workers and engines in order, then drops the test's keys. */
async function closeAll(prefix: string, ...all: { close(): Promise<unknown> }[]): Promise<void> {
  for (const c of all) await c.close();
  await dropPrefix(redis, prefix);
}

describe('C12: a job that runs holding its BullMQ lock while its hash still has finishedOn', () => {
  // BullMQ's keepLastIfActive re-queue stores the next job over a finished hash of the same id
  // without clearing finishedOn: the worker holding the lock must run it (not re-delay it for ever)
  it('is dispatched', async () => {
    const { prefix, queueName } = isolated();
    const { engine, calls } = countingEngine(prefix, queueName, 'dispatched', { inFlightRetryMs: 10 });
    const w = new ManualWorker(queueName, prefix);
    const data = (stage: string) => ({ v: 1, scope: ['book', 'ch'], stage, payload: {} });
    const dedup = { id: 'dd', keepLastIfActive: true, replace: true } as never;
    try {
      const q = engine.queue;
      await q.add('a', data('a'), { jobId: 'A', deduplication: dedup });
      const a = (await w.fetch())!;
      await q.add('x', data('x'), { jobId: 'X', deduplication: dedup }); // kept as A's next job
      await q.add('x', data('x'), { jobId: 'X', removeOnComplete: false }); // X added by hand meanwhile
      expect(await w.processNext(engine)).toMatchObject({ job: { id: 'X' }, result: { dispatched: true } });
      await w.run(engine, a.job, a.token); // A completes: BullMQ re-queues X over its completed hash
      expect(calls()).toBe(2);
      expect(await redis.hget(`${prefix}:${queueName}:X`, 'finishedOn')).not.toBeNull();
      await waitFor(async () => {
        await w.processNext(engine);
        return calls() === 3;
      }, 'the re-queued X dispatched');
    } finally {
      await closeAll(prefix, w, engine);
    }
  });
});
