import { Job } from 'bullmq';
import { DeferralStore } from '../../src/deferral-store';
import { FRESH_CHAIN, wakeUpJobId } from '../../src/job-data';
import { stageId } from '../../src/stage-ref';
import { harness } from '../helpers/engine';

/**
 * ioredis resends a command that was sent but not answered when the
 * connection drops (standalone `autoResendUnfulfilledCommands`, Cluster
 * `retryDelayOnFailover`). If the deferral's transaction ran and only its
 * reply was lost (or the old master ran it before a failover), it runs a
 * second time. This test sends the engine's deferral transaction twice, as
 * such a resend does; on a Redis, or on a Cluster with `TEST_REDIS_CLUSTER`.
 * (It was also in test/cluster/replayed-commands.test.ts: one copy now.)
 */
describe('C14: a deferral transaction replayed after its reply was lost', () => {
  it('answers "recorded" and keeps the wake-up the first run added, the deferral it recorded and one log line', async () => {
    const { engine, redis, prefix, queueName } = harness();
    const ref = { scope: ['book-1', 'ch-1'], stage: 'image' };
    const sid = stageId(ref);
    const store = new DeferralStore(engine.queue);
    const begun = await store.begin({ sid, ownJobId: '', lockMs: 30_000, wakeUp: false, skewToleranceMs: 1000 });
    if (begun.kind !== 'locked') throw new Error(begun.kind);
    const until = Date.now() + 60_000;
    const id = wakeUpJobId(sid, 'capacity', { ...FRESH_CHAIN, capacity: 1 }, until);
    const data = { v: 1, scope: ref.scope, stage: ref.stage, payload: {}, wakeUp: true };
    const defer = () =>
      store.defer(
        sid,
        begun.token,
        new Job(engine.queue, ref.stage, data, { delay: 60_000 }, id),
        until,
        'deferred #1',
        '',
        {
          cls: 'capacity',
          first: true,
          wakeSeq: '',
          seenLine: '',
        },
      );

    const first = await defer();
    expect(first.recorded).toBe(true);
    // the same transaction again, as ioredis would resend it
    const replay = await defer();
    expect(replay).toMatchObject({ recorded: true });

    expect(await engine.queue.getJobState(id)).toBe('delayed');
    expect(await engine.queue.getDelayedCount()).toBe(1);
    expect(await redis.get(engine.deferredStageKey(ref))).toBe(id);
    expect(await redis.get(store.markerKey(sid))).toBe(id);
    expect(await redis.zrange(store.keys.index, '0', '-1')).toEqual([id]);
    expect((await engine.listDeferred()).map((d) => d.wakeUpJobId)).toEqual([id]);
    // the log line is written once
    expect(await redis.lrange(`${prefix}:${queueName}:${id}:logs`, 0, -1)).toEqual(['deferred #1']);
  });
});
