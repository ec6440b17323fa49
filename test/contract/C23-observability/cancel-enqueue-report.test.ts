import { DeferralStore } from '../../../src/deferral-store';
import { stageId } from '../../../src/stage-ref';
import { harness, notSent } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

/**
 * Behaviours of src/engine.ts that mutants of it survived (docs/testing.md,
 * "Surviving mutants"): each test fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-1'], stage: 'image' };

describe('C23: cancel and enqueue report what they did', () => {
  it("cancelActiveDispatch's reason defaults to 'cancelled', in its answer and its event", async () => {
    const h = harness();
    const events: { reason: string }[] = [];
    h.engine.on('cancelled', (e) => events.push(e));
    const r = await h.engine.cancelActiveDispatch(image);
    expect(r.reason).toBe('cancelled');
    expect(events.map((e) => e.reason)).toEqual(['cancelled']);
  });

  it('a cancel that finds no lock leaves a running executor of this engine alone: its lock loss aborts it', async () => {
    let signal: AbortSignal | undefined;
    const h = harness({
      lockMs: 1000,
      executor: async (_ref, _p, ctx) => {
        signal = ctx.signal;
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        return notSent('aborted');
      },
    });
    const attempt = h.engine.dispatchStage(image, {});
    await waitFor(() => signal !== undefined, 'the executor to start');
    // the lock is gone (as after a failover): the cancel finds nothing in flight
    await h.redis.del(new DeferralStore(h.engine.queue).keys.lock(stageId(image)));
    expect((await h.engine.cancelActiveDispatch(image)).inFlight).toBe(false);
    await attempt;
    expect((signal!.reason as Error).message).toBe('Dispatch lock lost');
  });

  it('enqueue emits suppressed (via enqueue) only for a deferred stage', async () => {
    const h = harness();
    const seen: { reason: string; via: string }[] = [];
    h.engine.on('suppressed', (e) => seen.push(e));
    await h.engine.enqueue(image, {});
    expect(seen).toEqual([]);
    const other = { scope: ['book-14', 'ch-2'], stage: 'image' };
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(other, {});
    seen.length = 0;
    await h.engine.enqueue(other, {});
    expect(seen.map((e) => [e.reason, e.via])).toEqual([['deferred', 'enqueue']]);
  });
});
