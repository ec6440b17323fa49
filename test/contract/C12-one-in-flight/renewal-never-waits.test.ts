import { DeferralStore } from '../../../src/deferral-store';
import { stageId, type DispatchContext, type ExecutorResult, type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const slow: StageRef = { scope: ['book'], stage: 'video' };
const blocked: StageRef = { scope: ['book'], stage: 'image' };

/**
 * a `WAIT` blocks the connection it runs on for up to its
 * timeout. Here no replica exists, so every `WAIT` blocks for all of
 * `timeoutMs` (3 s) on the engine's connection, three times `lockMs`.
 */
describe('C12: no WAIT can delay a lock renewal', () => {
  it('a lock stays renewed (and another engine sees dispatch_in_flight) while a WAIT blocks the engine connection', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let started!: (ctx: DispatchContext) => void;
    const running = new Promise<DispatchContext>((r) => (started = r));
    const a = harness({
      lockMs: 1000,
      waitForReplicas: { replicas: 1, timeoutMs: 3000 },
      executor: async (ref, _p, ctx): Promise<ExecutorResult<string>> => {
        if (ref.stage === 'image') return notSent('no_worker_available');
        started(ctx);
        await released;
        return SENT;
      },
    });
    const b = harness({}, { prefix: a.prefix, queueName: a.queueName });
    const first = a.engine.dispatchStage(slow, {});
    await running;
    // a deferral whose WAIT now blocks engine A's connection for 3 s
    let waited = false;
    const deferral = a.engine.dispatchStage(blocked, {}).then((r) => {
      waited = true;
      return r;
    });
    const lock = new DeferralStore(b.engine.queue).keys.lock(stageId(slow));
    const pttls: number[] = [];
    try {
      await waitFor(async () => {
        pttls.push(await b.redis.pttl(lock));
        return pttls.filter((p, i) => i > 0 && p > pttls[i - 1]!).length >= 3;
      }, 'three renewals during the WAIT');
      expect(waited).toBe(false); // the WAIT was still blocking while the lock was renewed
      expect((await b.engine.dispatchStage(slow, {})).reason).toBe('dispatch_in_flight');
      expect(b.executor.calls).toHaveLength(0);
    } finally {
      release();
    }
    expect(await first).toMatchObject({ dispatched: true });
    expect(await deferral).toMatchObject({ reason: 'no_worker_available' });
  });
});
