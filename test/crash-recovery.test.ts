import { randomUUID } from 'node:crypto';
import { stageId } from '../src';
import { DeferralStore } from '../src/deferral-store';
import { harness, notSent, teardown } from './helpers/engine';

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
    expect((await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', false)).kind).toBe('locked');
    expect((await h.engine.dispatchStage(ref, {})).reason).toBe('dispatch_in_flight');
    expect((await store.begin(sid, `K\n${randomUUID()}`, 60_000, 'K', false)).kind).toBe('in_flight');
    expect((await store.begin(sid, `JX\n${randomUUID()}`, 60_000, 'JX', false)).kind).toBe('in_flight');
    // the redelivery of J
    const again = await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', false);
    expect(again.kind).toBe('locked');
  });

  it('completes as cancelled when its crashed attempt was cancelled in flight', async () => {
    const h = harness({ lockMs: 60_000 });
    const store = new DeferralStore(h.engine.queue);
    const sid = stageId(ref);
    await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', false);
    await h.engine.cancelActiveDispatch(ref);
    expect((await store.begin(sid, `J\n${randomUUID()}`, 60_000, 'J', false)).kind).toBe('cancelled');
    expect(await h.redis.exists(store.lockKey(sid))).toBe(0);
    h.executor.script(ref, notSent('no_worker_available'));
    expect((await h.engine.dispatchStage(ref, {})).reason).toBe('no_worker_available');
  });
});
