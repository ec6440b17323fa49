import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * Check of a producer in another language following BullMQ's
 * own docs. BullMQ for Python shows `deduplication: {id, ttl}` ("throttle
 * mode") next to the simple mode; the contract's `de:<stageId>` must hold as
 * long as the job waits, since a cancel reaches a waiting job through it.
 */
const ref = { scope: ['book-1', 'ch-2'], stage: 'image' };
const sid = 'book-1/ch-2/image';
const data = { v: 1, scope: ref.scope, stage: ref.stage, payload: null };
const good = { attempts: 3, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true };

describe('C19: the producer contract on deduplication', () => {
  it('an enqueue job whose deduplication has a ttl is refused (INVALID_JOB_OPTIONS): once its key expired a cancel no longer reached it and it dispatched the cancelled stage', async () => {
    const h = harness();
    const id = `${sid}@r.mx3p0000ab12`;
    await h.engine.queue.add(ref.stage, data, { ...good, jobId: id, deduplication: { id: sid, ttl: 100 } } as never);
    const dedup = `${h.prefix}:${h.queueName}:de:${sid}`;
    await waitFor(async () => (await h.redis.exists(dedup)) === 0, 'the deduplication key to expire');
    // the stage is cancelled while its job waits
    const cancelled = await h.engine.cancelActiveDispatch(ref);
    expect(cancelled).toMatchObject({ removedJobs: 0 }); // the key is gone: the cancel does not see the job
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length + failed.length === 1, 'the job to finish');
    expect(h.executor.calls).toEqual([]);
    expect(done).toEqual([]);
    expect(failed.map((f) => [f.id, (f.error as Error & { code?: string }).code])).toEqual([
      [id, 'INVALID_JOB_OPTIONS'],
    ]);
    expect(failed[0]!.error.message).toMatch(/ttl/);
  });
});
