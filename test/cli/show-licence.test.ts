import { stageId } from '../../src';
import { readStage } from '../../src/cli/read';
import { DeferralStore } from '../../src/deferral-store';
import { ioReader, QueueKeys } from '../../src/store/reader';
import { harness } from '../helpers/engine';
import { onCluster, waitFor } from '../helpers/redis';
import { bullLock, fetchBy } from '../helpers/held';
import { addProducerJob } from '../helpers/producer-job';

/**
 * The stage lock lives by its TTL only: a lock whose job BullMQ completed (its process died
 * before the release) keeps the stage in flight for every script until it goes. The CLI's
 * `show` must read it so too.
 */
const ref = { scope: ['book-1', 'ch-2'], stage: 'image' };
const sid = stageId(ref);

(onCluster ? describe.skip : describe)('C29: the CLI reads the stage lock as the scripts do', () => {
  it('show of a stage whose job completed without its release (its process died) says in_flight, as the engine does, until the lock goes', async () => {
    const h = harness();
    await h.engine.enqueue(ref, {});
    const job = await fetchBy(h, 'bull-1');
    const store = new DeferralStore(h.engine.queue);
    const begun = await store.begin({
      sid,
      ownJobId: job.id as string,
      lockMs: 30_000,
      wakeUp: false,
      skewToleranceMs: 1000,
      bullToken: 'bull-1',
    });
    expect(begun).toMatchObject({ kind: 'locked' });
    const keys = new QueueKeys(h.prefix, h.queueName);
    const reader = ioReader(h.redis);
    expect((await readStage(reader, keys, sid)).state).toBe('in_flight');
    // BullMQ completes the job (its completion deletes the job's lock, and removeOnComplete the job);
    // the process dies before its release is sent
    await (await h.engine.queue.getJob(job.id as string))!.moveToCompleted({ dispatched: true }, 'bull-1', false);
    expect(await h.redis.exists(bullLock(h, job.id as string))).toBe(0);
    expect(await h.redis.exists(keys.lock(sid))).toBe(1);
    // the engine: in flight (the lock lives by its TTL)
    expect((await store.probe(sid)).kind).toBe('in_flight');
    // the CLI: the same
    expect((await readStage(reader, keys, sid)).state).toBe('in_flight');
    // once the lock is gone (its release, or its TTL), neither calls it in flight
    await h.redis.del(keys.lock(sid));
    expect((await store.probe(sid)).kind).toBe('none');
    expect((await readStage(reader, keys, sid)).state).not.toBe('in_flight');
  });
});

describe('C29: show finds a stage’s job through its licence index', () => {
  it('a job that failed for good (no deduplication key names it any more) shows as failed, with its id and reason', async () => {
    const h = harness();
    h.executor.script(ref, new Error('render farm down'));
    const { id } = await addProducerJob(h.engine.queue, ref, { attempts: 1 });
    h.engine.createWorker();
    const keys = new QueueKeys(h.prefix, h.queueName);
    await waitFor(async () => (await readStage(ioReader(h.redis), keys, sid)).state === 'failed', 'show says failed');
    expect(await readStage(ioReader(h.redis), keys, sid)).toEqual({
      state: 'failed',
      jobId: id,
      jobState: 'failed',
      failedReason: 'render farm down',
    });
  });
});
