import { randomUUID } from 'node:crypto';
import { stageId } from '../src';
import { DeferralStore } from '../src/deferral-store';
import { harness, notSent, SENT, teardown } from './helpers/engine';
import { waitFor } from './helpers/redis';

afterEach(teardown);

const ref = { scope: ['book', 'ch', 'sc'], stage: 'image' };

/**
 * A worker that dies mid-attempt leaves the stage's lock behind. BullMQ
 * redelivers the job only once that worker is gone, so the same job may take
 * the lock over at once; anyone else still sees the stage in flight.
 */
describe('a job redelivered after its worker died', () => {
  it('takes over the lock its crashed attempt left; others still see dispatch_in_flight', async () => {
    const h = harness({ lockMs: 60_000 });
    const store = new DeferralStore(h.engine.queue);
    const sid = stageId(ref);
    // the crashed attempt of job J
    expect((await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', '')).kind).toBe('locked');
    expect((await h.engine.dispatchStage(ref, {})).reason).toBe('dispatch_in_flight');
    expect((await store.begin(sid, `K\n${randomUUID()}`, 60_000, 'K', '')).kind).toBe('in_flight');
    expect((await store.begin(sid, `JX\n${randomUUID()}`, 60_000, 'JX', '')).kind).toBe('in_flight');
    // the redelivery of J
    const again = await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', '');
    expect(again.kind).toBe('locked');
  });

  it('completes as cancelled when its crashed attempt was cancelled in flight', async () => {
    const h = harness({ lockMs: 60_000 });
    const store = new DeferralStore(h.engine.queue);
    const sid = stageId(ref);
    await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', '');
    await h.engine.cancelActiveDispatch(ref);
    expect((await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', '')).kind).toBe('cancelled');
    expect(await h.redis.exists(store.lockKey(sid))).toBe(0);
    h.executor.script(ref, notSent('no_worker_available'));
    expect((await h.engine.dispatchStage(ref, {})).reason).toBe('no_worker_available');
  });
});

describe('a lock that expired while the executor ran (e.g. across a failover)', () => {
  it('records no deferral, and the job tries again instead of being dropped', async () => {
    const h = harness({ inFlightRetryMs: 20 });
    const store = new DeferralStore(h.engine.queue);
    h.executor.script(
      ref,
      async () => {
        await h.redis.del(store.lockKey(stageId(ref)));
        return notSent('no_worker_available');
      },
      SENT,
    );
    await h.engine.enqueue(ref, {});
    const worker = h.engine.createWorker();
    const done: unknown[] = [];
    worker.on('completed', (_j, r) => done.push(r));
    await waitFor(() => done.length === 1, 'job completed after trying again');
    expect(done[0]).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(2);
    expect(h.journal).toHaveLength(0);
    expect(await h.engine.queue.getJobCounts('delayed', 'failed')).toEqual({ delayed: 0, failed: 0 });
  });
});
