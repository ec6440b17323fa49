import { expectWindowLeft, harness, notSent } from '../../helpers/engine';

const scene = ['book-1', 'ch-2', 'sc-7'];
const image = { scope: scene, stage: 'image' };
const video = { scope: scene, stage: 'video' };

describe('C1: a deferrable outcome defers the stage for its class window', () => {
  it('returns the outcome, retryable, with the executor result; calls rollback once and journals once', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'));
    const before = Date.now();
    const r = await h.engine.dispatchStage(image, { p: 1 }, { buildId: 'b1' });
    expect(r).toMatchObject({ dispatched: false, reason: 'no_worker_available', retryable: true });
    expect(r.result).toMatchObject({ dispatched: false, reason: 'no_worker_available', retryable: true });
    expect(r.until).toBeGreaterThanOrEqual(before + 30_000 - 50);
    expect(h.rollbacks).toEqual([{ ref: image, reason: 'no_worker_available' }]);
    expect(h.journal).toHaveLength(1);
    expect(h.journal[0]!.event).toMatchObject({
      type: 'stage_deferred',
      reason: 'no_worker_available',
      class: 'capacity',
      deferrals: 1,
    });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(image));
    expect(pttl).toBeGreaterThan(29_000);
    expectWindowLeft(pttl, 30_000);
  });

  it('uses the idempotent window for already_completed', async () => {
    const h = harness();
    h.executor.script(image, notSent('already_completed'));
    await h.engine.dispatchStage(image, {});
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(image));
    expect(pttl).toBeGreaterThan(119_000);
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ reason: 'deferred_idempotent', deferred: true });
  });

  it('reports the dominant notSent reason', async () => {
    const h = harness();
    h.executor.script(
      image,
      notSent('no_jobs_sent', {
        notSent: new Map([
          ['duplicate_pending', 1],
          ['ambiguous_post', 3],
        ]),
      }),
    );
    const r = await h.engine.dispatchStage(image, {});
    expect(r.reason).toBe('ambiguous_post');
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });

  it('does not defer when notSent holds a real failure', async () => {
    const h = harness();
    h.executor.script(
      image,
      notSent('no_worker_available', {
        notSent: new Map([
          ['no_worker_available', 3],
          ['send_failed', 1],
        ]),
      }),
    );
    const r = await h.engine.dispatchStage(image, {});
    // the executor's own reason is capacity, but the attempt also had a real failure: that one is reported
    expect(r).toMatchObject({ dispatched: false, reason: 'send_failed' });
    expect(r.deferred).toBeUndefined();
    expect(h.journal).toHaveLength(0);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('journals one deferral when several engines defer the same stage at once', async () => {
    const h = harness();
    const others = [1, 2, 3].map(() => harness({}, { prefix: h.prefix, queueName: h.queueName }));
    for (const x of [h, ...others]) x.executor.fallback = notSent('no_worker_available');
    const results = await Promise.all([h, ...others].map((x) => x.engine.dispatchStage(image, {})));
    const journalled = [h, ...others].reduce((n, x) => n + x.journal.length, 0);
    const executed = [h, ...others].reduce((n, x) => n + x.executor.calls.length, 0);
    expect(journalled).toBe(1);
    expect(executed).toBe(1);
    expect(results.filter((r) => r.reason === 'no_worker_available')).toHaveLength(1);
    expect(await h.engine.listDeferred()).toHaveLength(1);
    expect(await h.redis.zcard(`${h.prefix}:${h.queueName}:delayed`)).toBe(1);
  });
});

describe('C1: deferral is per stage', () => {
  it('another stage of the scene and the same stage of another book are not blocked', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    expect((await h.engine.dispatchStage(video, {})).dispatched).toBe(true);
    expect((await h.engine.dispatchStage({ scope: ['book-2', 'ch-2', 'sc-7'], stage: 'image' }, {})).dispatched).toBe(
      true,
    );
    expect((await h.engine.dispatchStage({ scope: ['book-1', 'ch-2'], stage: 'image' }, {})).dispatched).toBe(true);
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });
});
