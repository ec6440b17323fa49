import { Job, Queue } from 'bullmq';
import type IORedis from 'ioredis';
import { DeferralStore } from '../../src/deferral-store';
import { FRESH_CHAIN, wakeUpJobId } from '../../src/job-data';
import { stageId } from '../../src/stage-ref';
import { client, closeClients, dropPrefix, isolated, redisOptions } from '../helpers/redis';

/**
 * ioredis resends commands that were sent but not answered when the
 * connection drops (`autoResendUnfulfilledCommands`). If the deferral's MULTI
 * ran and only its reply was lost, it runs a second time.
 */
describe('a deferral transaction replayed after its reply was lost', () => {
  let redis: IORedis;
  beforeAll(() => {
    redis = client();
  });
  afterAll(closeClients);

  it('answers "recorded" and keeps the wake-up the first run added', async () => {
    const { prefix, queueName } = isolated();
    const queue = new Queue(queueName, { connection: redisOptions() as never, prefix });
    const store = new DeferralStore(queue);
    const ref = { scope: ['a'], stage: 's' };
    const sid = stageId(ref);
    try {
      const begun = await store.begin({ sid, ownJobId: '', lockMs: 30_000, wakeUp: false, skewToleranceMs: 1000 });
      if (begun.kind !== 'locked') throw new Error(begun.kind);
      const tok = begun.token;
      const id = wakeUpJobId(sid, 'capacity', { ...FRESH_CHAIN, capacity: 1 }, Date.now() + 60_000);
      const data = { v: 1, scope: ref.scope, stage: ref.stage, payload: {}, wakeUp: true };
      const first = await store.defer(
        sid,
        tok,
        new Job(queue, 's', data, { delay: 60_000 }, id),
        Date.now() + 60_000,
        '',
        '',
        { cls: 'capacity', first: true, wakeSeq: '' },
      );
      expect(first.recorded).toBe(true);
      // the same transaction again, as ioredis would resend it
      const replay = await store.defer(
        sid,
        tok,
        new Job(queue, 's', data, { delay: 60_000 }, id),
        Date.now() + 60_000,
        '',
        '',
        { cls: 'capacity', first: true, wakeSeq: '' },
      );
      expect(replay).toMatchObject({ recorded: true });
      expect(await queue.getJobState(id)).toBe('delayed');
      expect(await redis.get(store.markerKey(sid))).toBe(id);
      expect(await redis.zrange(store.keys.index, '0', '-1')).toEqual([id]);
    } finally {
      await queue.close();
      await dropPrefix(redis, prefix);
    }
  });
});
