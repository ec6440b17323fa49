import type { StageRef } from '../../../src';
import { harness, LONG_WINDOWS, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { inWaitIndex, setChainStart } from '../../helpers/observe';

/** Check of the capacity wait index, one sorted set per stage kind (`sd:wq:<kind>`, kinds in `sd:wqk`). */
const NO = notSent('no_worker_available');
const long = { windows: LONG_WINDOWS };

function waitKey(h: { prefix: string; queueName: string }, kind: string) {
  return `${h.prefix}:${h.queueName}:sd:wq:${kind}`;
}

describe('C8: the per-kind wait index', () => {
  it('every path that ends a capacity chain takes its stage out of the wait index', async () => {
    const h = harness({
      ...long,
      limits: { maxCapacityDeferrals: 1 },
      retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } },
    });
    const ref = (name: string): StageRef => ({ scope: ['w', name], stage: 'image' });
    // internal (inWaitIndex): a stage left in the index after its chain ended changes no answer
    const score = async (r: StageRef) => ((await inWaitIndex(h.redis, h, r)) ? 'waiting' : null);
    const deferred = async (r: StageRef) => {
      h.executor.script(r, NO);
      await h.engine.dispatchStage(r, {});
      expect(await score(r)).not.toBeNull();
    };
    // success (a direct call after the window)
    const ok = ref('ok');
    await deferred(ok);
    await h.redis.del(h.engine.deferredStageKey(ok));
    h.executor.script(ok, SENT);
    await h.engine.dispatchStage(ok, {});
    expect(await score(ok)).toBeNull();
    // cancel
    const cancelled = ref('cancel');
    await deferred(cancelled);
    await h.engine.cancelActiveDispatch(cancelled);
    expect(await score(cancelled)).toBeNull();
    // clear
    const cleared = ref('clear');
    await deferred(cleared);
    expect(await h.engine.clearDeferrals(['w', 'clear'])).toBe(1);
    expect(await score(cleared)).toBeNull();
    // an idempotent deferral after a capacity one: the chain goes on (entry kept) until it succeeds
    const idem = ref('idem');
    await deferred(idem);
    await h.redis.del(h.engine.deferredStageKey(idem));
    h.executor.script(idem, notSent('already_completed'));
    await h.engine.dispatchStage(idem, {});
    expect(await score(idem)).not.toBeNull();
    await h.redis.del(h.engine.deferredStageKey(idem));
    h.executor.script(idem, SENT);
    await h.engine.dispatchStage(idem, {});
    expect(await score(idem)).toBeNull();
    // the deferral limit (its wake-up runs, defers again past the limit: fails for good)
    const limit = ref('limit');
    await deferred(limit);
    h.executor.script(limit, NO);
    // a terminal failure (its wake-up runs and the executor throws, no attempt left)
    const failed = ref('fail');
    await deferred(failed);
    h.executor.script(failed, new Error('boom'));
    const worker = h.engine.createWorker();
    const gone: string[] = [];
    worker.on('failed', (job) => gone.push(job!.id!));
    expect((await h.engine.wakeDeferred({ scope: ['w'], limit: 10 })).woken).toHaveLength(2);
    await waitFor(() => (gone.length === 2 ? gone : undefined), 'both jobs failed for good', 15_000);
    expect(await score(limit)).toBeNull();
    expect(await score(failed)).toBeNull();
    expect(await h.redis.zcard(waitKey(h, 'image'))).toBe(0);
  });

  it('without a kind, equal chain starts across kinds wake in stage-id order, as within one kind', async () => {
    const h = harness(long);
    h.executor.fallback = NO;
    const refs: StageRef[] = [
      { scope: ['b'], stage: 'audio' },
      { scope: ['a'], stage: 'video' },
      { scope: ['c'], stage: 'image' },
      { scope: ['a'], stage: 'image' },
      { scope: ['b'], stage: 'image' },
    ];
    for (const r of refs) await h.engine.dispatchStage(r, {});
    // one start for all chains (one millisecond, as a burst of deferrals has)
    for (const r of refs) expect(await setChainStart(h.redis, h, r, 1000)).toBe(true);
    const woken = (await h.engine.wakeDeferred({ limit: 10 })).woken.map((r) => `${r.scope[0]}/${r.stage}`);
    expect(woken).toEqual(['a/image', 'a/video', 'b/audio', 'b/image', 'c/image']);
  });

  it('sd:wqk holds the kinds that have a wait index: a kind whose chains all ended leaves it at the next unfiltered wake (no read per kind ever seen)', async () => {
    const h = harness(long);
    h.executor.fallback = NO;
    const base = `${h.prefix}:${h.queueName}:`;
    for (let i = 0; i < 20; i++) await h.engine.dispatchStage({ scope: ['k'], stage: `kind-${i}` }, {});
    expect(await h.redis.scard(`${base}sd:wqk`)).toBe(20);
    expect(await h.engine.clearDeferrals(['k'])).toBe(20);
    await h.engine.dispatchStage({ scope: ['k2'], stage: 'kind-0' }, {});
    expect((await h.engine.wakeDeferred({ limit: 5 })).woken).toEqual([{ scope: ['k2'], stage: 'kind-0' }]);
    const kinds = await h.redis.smembers(`${base}sd:wqk`);
    for (const k of kinds) expect({ k, index: await h.redis.exists(waitKey(h, k)) }).toEqual({ k, index: 1 });
    expect(kinds).toEqual(['kind-0']);
  });
});
