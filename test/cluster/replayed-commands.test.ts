import { Job } from 'bullmq';
import { createDispatchEngine, stageId, type DispatchEngine } from '../../src';
import { DeferralStore } from '../../src/deferral-store';
import { client, closeClients, dropPrefix, isolated } from '../helpers/redis';

/**
 * ioredis resends a command whose node closed the connection before replying
 * (Cluster `retryDelayOnFailover`, standalone `autoResendUnfulfilledCommands`).
 * When the old master had run it, the new one runs it a second time. These
 * tests send the engine's deferral transaction twice, as such a resend does.
 */
describe('a deferral transaction resent by the client after a failover', () => {
  const redis = client();
  let names: { prefix: string; queueName: string };
  let engine: DispatchEngine;

  beforeEach(() => {
    names = isolated();
    engine = createDispatchEngine({
      connection: redis,
      ...names,
      executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
    });
  });

  afterEach(async () => {
    await engine.close();
    await dropPrefix(redis, names.prefix);
  });

  afterAll(closeClients);

  it('keeps the wake-up the first run added, and the deferral it recorded', async () => {
    const ref = { scope: ['book-1', 'ch-1'], stage: 'image' };
    const sid = stageId(ref);
    const store = new DeferralStore(engine.queue);
    const begun = await store.begin({ sid, ownJobId: '', lockMs: 30_000, wakeUp: false, skewToleranceMs: 1000 });
    if (begun.kind !== 'locked') throw new Error(begun.kind);

    const id = `${sid}@cap.1.0.0.${Date.now().toString(36)}abcd`;
    const wakeUp = () =>
      new Job(
        engine.queue,
        ref.stage,
        { v: 1, scope: ref.scope, stage: ref.stage, payload: {}, wakeUp: true },
        { delay: 60_000 },
        id,
      );
    const first = await store.defer(sid, begun.token, wakeUp(), Date.now() + 60_000, 'deferred #1', '', {
      cls: 'capacity',
      first: true,
      wakeSeq: '',
    });
    expect(first.recorded).toBe(true);

    const resent = await store.defer(sid, begun.token, wakeUp(), Date.now() + 60_000, 'deferred #1', '', {
      cls: 'capacity',
      first: true,
      wakeSeq: '',
    });
    expect(resent.recorded).toBe(true);
    expect(await redis.exists(`${names.prefix}:${names.queueName}:${id}`)).toBe(1);
    expect(await engine.queue.getDelayedCount()).toBe(1);
    expect(await redis.get(engine.deferredStageKey(ref))).toBe(id);
    expect((await engine.listDeferred()).map((d) => d.wakeUpJobId)).toEqual([id]);
    // the log line is written once
    expect(await redis.lrange(`${names.prefix}:${names.queueName}:${id}:logs`, 0, -1)).toEqual(['deferred #1']);
  });
});
