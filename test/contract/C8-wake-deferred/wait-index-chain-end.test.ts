import { stageId } from '../../../src/stage-ref';
import { harness, notSent, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { inWaitIndex } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
const crash = new Error('executor crashed');

/**
 * Whether `image` waits in its kind's wait index (wakeDeferred's order), through the named internal
 * helper: an entry left after its chain ended wakes nothing (wakeDeferred skips a stage with no
 * wake-up, and a skip spends none of its limit), so no public view shows it; each test also
 * asserts whom wakeDeferred wakes.
 */
const waits = (h: ReturnType<typeof harness>) => inWaitIndex(h.redis, h, image);
const NO = notSent('no_worker_available');

describe("C8: a chain's end leaves nothing in the wait index (wakeDeferred's)", () => {
  it.each(['cancel', 'clear'] as const)(
    'a %s of a capacity-deferred stage removes it from its kind’s wait index',
    async (how) => {
      const h = harness();
      h.executor.fallback = NO;
      expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
      expect(await waits(h)).toBe(true);
      if (how === 'cancel') expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ hadDeferral: true });
      else expect(await h.engine.clearDeferrals(image.scope)).toBe(1);
      expect(await waits(h)).toBe(false);
      expect((await h.engine.wakeDeferred()).woken).toEqual([]);
    },
  );

  it('a wake-up that fails for good (its chain ends in a real failure) removes the stage from its kind’s wait index', async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 }, retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, NO, crash);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    expect(await waits(h)).toBe(true);
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the wake-up failed for good');
    expect(await waits(h)).toBe(false);
    expect((await h.engine.wakeDeferred()).woken).toEqual([]);
  });
});

describe("C8: a chain's end by a success leaves nothing in the wait index", () => {
  it('a success of a capacity-deferred stage (its deferral ended by hand, its wake-up still licensed) removes it from its kind’s wait index', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, SENT);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    expect(await waits(h)).toBe(true);
    await h.redis.del(h.engine.deferredStageKey(image));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
    expect(await waits(h)).toBe(false);
    expect((await h.engine.wakeDeferred()).woken).toEqual([]);
  });
});

describe('C8: a stage woken early that defers again (its chain goes on)', () => {
  it('waits in the wait index again: a second wakeDeferred wakes it', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, NO, SENT);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the woken wake-up ran (capacity again)');
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    expect((await h.engine.listDeferred())[0]!.deferrals).toBe(2);
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
    await waitFor(() => done.length === 2, 'the second woken wake-up ran');
    expect(done[1]!.result).toMatchObject({ dispatched: true });
  });
});

describe('C8: a stage whose chain has no wait-index entry (it began before the per-kind wait index: an upgrade)', () => {
  it('its next capacity deferral (the chain goes on) puts it back: wakeDeferred finds it', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, NO);
    const first = await h.engine.dispatchStage(image, {});
    expect(first).toMatchObject({ until: expect.any(Number) });
    await h.redis.zrem(`${h.prefix}:${h.queueName}:sd:wq:image`, stageId(image));
    expect(await waits(h)).toBe(false);
    // an operator promotes the wake-up (Bull Board's "promote"): it runs now, capacity again
    const [d] = await h.engine.listDeferred();
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.promote();
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the promoted wake-up ran');
    expect((await h.engine.listDeferred())[0]!.deferrals).toBe(2);
    expect(await waits(h)).toBe(true);
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
  });
});

/** An `image` and a `video` stage of one scene, each capacity-deferred for 60 s. */
async function twoKindsDeferred() {
  const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
  h.executor.fallback = NO;
  const video = { scope: image.scope, stage: 'video' };
  for (const s of [image, video]) await h.engine.dispatchStage(s, {});
  return { h, video };
}

describe('C8: the set of stage kinds with a wait index (sd:wqk)', () => {
  it('a kind whose chains all ended leaves it at the next wakeDeferred without a kind; a kind still waiting stays', async () => {
    const { h, video } = await twoKindsDeferred();
    const kinds = `${h.prefix}:${h.queueName}:sd:wqk`;
    expect((await h.redis.smembers(kinds)).sort()).toEqual(['image', 'video']);
    await h.engine.cancelActiveDispatch(image);
    expect((await h.engine.wakeDeferred({ stage: 'nothing-of-that-kind' })).woken).toEqual([]);
    expect((await h.redis.smembers(kinds)).sort()).toEqual(['image', 'video']);
    expect((await h.engine.wakeDeferred({ scope: ['elsewhere'] })).woken).toEqual([]);
    expect((await h.engine.wakeDeferred({ limit: 1 })).woken).toEqual([video]);
    expect(await h.redis.smembers(kinds)).toEqual(['video']);
  });
});
