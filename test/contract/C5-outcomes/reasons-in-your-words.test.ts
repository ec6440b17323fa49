import {
  alreadyDone,
  CapacityError,
  createDispatchEngine,
  type DeferralJournalEvent,
  DispatchFailedError,
  dispatched,
  InvalidOptionsError,
  noCapacity,
  type StageRef,
} from '../../../src';
import { runInNewContext } from 'node:vm';
import { harness, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * An executor answers in its own words: helpers (`noCapacity()`, `alreadyDone()`,
 * `dispatched()`), a thrown `CapacityError` as BullMQ users throw `RateLimitError`, reasons of
 * its own listed in the engine's `outcomes`, and `jobs` left out.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C5: reasons in the executor’s own words', () => {
  it('noCapacity() and a plain { dispatched: false, reason: "no_capacity" } without `jobs` defer for the capacity window', async () => {
    const h = harness();
    const video = { ...image, stage: 'video' };
    h.executor.script(image, noCapacity());
    h.executor.script(video, async () => ({ dispatched: false, reason: 'no_capacity' }));
    for (const ref of [image, video]) {
      const r = await h.engine.dispatchStage(ref, {});
      expect(r).toMatchObject({ dispatched: false, reason: 'no_capacity', retryable: true });
      expect(await h.engine.isStageDeferred(ref)).toBe(true);
    }
    expect(h.journal.map((j) => (j.event as DeferralJournalEvent).class)).toEqual(['capacity', 'capacity']);
  });

  it('alreadyDone() defers for the idempotent window; dispatched() without a count is a dispatch', async () => {
    const h = harness();
    const sent: (number | undefined)[] = [];
    h.engine.on('dispatched', (e) => sent.push(e.jobs));
    const invalid: unknown[] = [];
    h.engine.on('resultInvalid', (e) => invalid.push(e));
    h.executor.script(image, alreadyDone());
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ dispatched: false, reason: 'already_completed' });
    expect((h.journal[0]!.event as DeferralJournalEvent).class).toBe('idempotent');

    const video = { ...image, stage: 'video' };
    h.executor.script(video, dispatched());
    expect(await h.engine.dispatchStage(video, {})).toMatchObject({ dispatched: true });
    expect(sent).toEqual([undefined]);
    expect(invalid).toEqual([]);
  });

  it('reasons listed in `outcomes` defer in their class, and events and listings show them as given', async () => {
    const h = harness({ outcomes: { capacity: ['gpu_pool_full'], idempotent: ['already_rendered'] } });
    const video = { ...image, stage: 'video' };
    h.executor.script(image, async () => ({ dispatched: false, reason: 'gpu_pool_full' }));
    h.executor.script(video, async () => ({ dispatched: false, reason: 'already_rendered' }));
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(video, {});
    const listed = await h.engine.listDeferred(['book-1']);
    expect(listed.map((d) => [d.ref.stage, d.reason, d.class]).sort()).toEqual([
      ['image', 'gpu_pool_full', 'capacity'],
      ['video', 'already_rendered', 'idempotent'],
    ]);
    // the idempotent window (120 s in the harness), not the capacity one (30 s)
    expect(await h.redis.pttl(h.engine.deferredStageKey(video))).toBeGreaterThan(60_000);
  });

  it('a thrown CapacityError defers whatever its reason, waits its retryAfterMs, and spends no attempt', async () => {
    const h = harness({
      retry: { attempts: 1, backoff: fast },
      windows: { capacitySeconds: 30, capacityMaxSeconds: 120, jitter: 0 },
    });
    h.executor.script(image, new CapacityError({ reason: 'render_farm_429', retryAfterMs: 45_000 }), SENT);
    const { jobId } = await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done } = watch(worker);
    await waitFor(() => done.length === 1, 'the deferring job completed');
    expect(done[0]!.id).toBe(jobId);
    const [deferred] = await h.engine.listDeferred(['book-1']);
    expect(deferred).toMatchObject({ reason: 'render_farm_429', class: 'capacity' });
    // the hint, not the 30 s window
    expect(await h.redis.pttl(h.engine.deferredStageKey(image))).toBeGreaterThan(40_000);
  });

  it('a CapacityError whose retryAfterMs is no number >= 0 (a missing Retry-After read as NaN) defers for the capacity window', async () => {
    const h = harness();
    for (const [i, retryAfterMs] of [Number.NaN, -1, '5000' as unknown as number].entries()) {
      const ref = { ...image, stage: `s${i}` };
      h.executor.script(ref, new CapacityError({ retryAfterMs }));
      expect(await h.engine.dispatchStage(ref, {})).toMatchObject({ dispatched: false, reason: 'no_capacity' });
      expect(await h.redis.pttl(h.engine.deferredStageKey(ref))).toBeGreaterThan(20_000);
    }
  });

  it('a subclass of CapacityError with a name of its own, and one of another realm or bundle (told by its name), defer as capacity', async () => {
    class GpuPoolFull extends CapacityError {
      constructor() {
        super({ reason: 'gpu_pool_full' });
        this.name = 'GpuPoolFull';
      }
    }
    const foreign = runInNewContext(
      "(() => { const e = new Error('no capacity'); e.name = 'CapacityError'; e.reason = 'farm_full'; return e; })()",
    ) as unknown;
    const h = harness();
    const video = { ...image, stage: 'video' };
    h.executor.script(image, new GpuPoolFull());
    h.executor.script(video, async () => {
      throw foreign;
    });
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: false, reason: 'gpu_pool_full' });
    expect(await h.engine.dispatchStage(video, {})).toMatchObject({ dispatched: false, reason: 'farm_full' });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    expect(await h.engine.isStageDeferred(video)).toBe(true);
  });

  it('a copy of CapacityError whose reason is no string defers as no_capacity', async () => {
    const h = harness();
    h.executor.script(image, async () => {
      throw Object.assign(new Error('no capacity'), { name: 'CapacityError', reason: 42 });
    });
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: false, reason: 'no_capacity' });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });

  it('the CapacityError class itself thrown (no instance) is no capacity answer: the call rethrows it', async () => {
    const h = harness();
    h.executor.script(image, async () => {
      throw CapacityError;
    });
    await expect(h.engine.dispatchStage(image, {})).rejects.toBe(CapacityError);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });

  it('{ dispatched: true } alone (no jobs, no reason) is a plain dispatch: no resultInvalid', async () => {
    const h = harness();
    const invalid: unknown[] = [];
    h.engine.on('resultInvalid', (e) => invalid.push(e));
    h.executor.script(image, async () => ({ dispatched: true }) as never);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
    expect(invalid).toEqual([]);
  });

  it('a reason in no list fails the job with DISPATCH_FAILED naming the deferrable reasons and how to add one', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, async () => ({ dispatched: false, reason: 'gpu_busy' }));
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the job failed');
    const error = failed[0]!.error;
    expect(error).toBeInstanceOf(DispatchFailedError);
    expect(error.message).toContain(
      'gpu_busy (not deferrable; the deferrable reasons are capacity: no_worker_available',
    );
    expect(error.message).toContain('no_capacity');
    expect(error.message).toContain('`outcomes`');
    expect(error.message).toContain('CapacityError');
  });

  it.each([
    [{ capacity: ['x'], idempotent: ['x'] }],
    [{ capacity: ['already_completed'] }],
    [{ idempotent: ['no_worker_available'] }],
    [{ capacity: [''] }],
    [{ capacity: 'gpu_pool_full' }],
    [{ capasity: ['x'] }],
    [{ capacity: ['send_failed'] }],
    [{ capacity: ['executor_error'] }],
  ])('outcomes %j is INVALID_OPTIONS before anything is opened', (outcomes) => {
    expect(() =>
      createDispatchEngine({ connection: { ...redisOptions(), lazyConnect: true }, outcomes } as never),
    ).toThrow(InvalidOptionsError);
  });
});
