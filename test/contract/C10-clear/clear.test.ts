import { harness, LONG_WINDOWS, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const ref = (book: string, ch: string, sc: string, stage = 'image') => ({ scope: [book, ch, sc], stage });

describe('C10: clearDeferrals(scope)', () => {
  async function deferAll(h: ReturnType<typeof harness>, refs: ReturnType<typeof ref>[]) {
    h.executor.fallback = notSent('no_worker_available');
    for (const r of refs) await h.engine.dispatchStage(r, {});
    h.executor.fallback = SENT;
  }

  it('clears every deferral in the scope, returns the count, and touches nothing outside it', async () => {
    const h = harness();
    const inside = [ref('book', 'c1', 's1'), ref('book', 'c1', 's2'), ref('book', 'c2', 's1', 'video')];
    const outside = [
      ref('book:x', 'c1', 's1'),
      ref('bookx', 'c1', 's1'),
      ref('boo', 'k', 's1'),
      { scope: ['book/c1'], stage: 'image' },
    ];
    await deferAll(h, [...inside, ...outside]);
    expect(await h.engine.clearDeferrals(['book'])).toBe(3);
    for (const r of inside) expect(await h.engine.isStageDeferred(r)).toBe(false);
    for (const r of outside) expect(await h.engine.isStageDeferred(r)).toBe(true);
    expect((await h.engine.listDeferred()).map((d) => d.ref.scope[0]).sort()).toEqual([
      'boo',
      'book/c1',
      'book:x',
      'bookx',
    ]);
  });

  it('clears a scope larger than one batch (1,201 stages, batches of 500): every deferral ends, every wake-up is promoted, one count', async () => {
    // (windows of 10 min: no deferral of the test ends by itself, however slow the machine)
    const h = harness({ windows: LONG_WINDOWS });
    const many = Array.from({ length: 1201 }, (_, i) => ref('big', `c${i % 7}`, `s${i}`));
    await deferAll(h, [...many, ref('other', 'c', 's')]);
    expect(await h.engine.queue.getDelayedCount()).toBe(1202);
    expect(await h.engine.clearDeferrals(['big'])).toBe(1201);
    expect(await h.engine.queue.getDelayedCount()).toBe(1);
    expect(await h.engine.queue.getWaitingCount()).toBe(1201);
    expect((await h.engine.listDeferred()).map((d) => d.ref.scope[0])).toEqual(['other']);
    // each woken stage starts a fresh chain: its wake-up's run, deferred again, is the chain's first deferral
    h.executor.fallback = notSent('no_worker_available');
    const worker = h.engine.createWorker({ concurrency: 20 });
    const again = await waitFor(
      async () => {
        const listed = await h.engine.listDeferred(['big']);
        return listed.length === 1201 ? listed : undefined;
      },
      'every woken stage to run and defer again',
      60_000,
    );
    expect(again.filter((d) => d.deferrals !== 1)).toEqual([]);
    expect(h.executor.calls).toHaveLength(1202 + 1201);
    await worker.close();
  }, 90_000);

  it('clears one scene exactly', async () => {
    const h = harness();
    await deferAll(h, [
      ref('book', 'ch', 'sc'),
      ref('book', 'ch', 'sc', 'video'),
      ref('book', 'ch', 'sc2'),
      ref('book', 'ch2', 'sc'),
    ]);
    expect(await h.engine.clearDeferrals(['book', 'ch', 'sc'])).toBe(2);
    expect((await h.engine.listDeferred(['book'])).map((d) => d.ref.scope.join('/')).sort()).toEqual([
      'book/ch/sc2',
      'book/ch2/sc',
    ]);
  });

  it('makes the stage due at once and dispatches it once, not twice, with a fresh chain', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    const a = ref('book', 'ch', 'sc');
    await deferAll(h, [a]);
    const worker = h.engine.createWorker();
    const done: unknown[] = [];
    worker.on('completed', (_j, r) => done.push(r));
    expect(await h.engine.clearDeferrals(['book'])).toBe(1);
    await waitFor(() => done.length === 1, 'cleared stage dispatched');
    expect(h.executor.calls).toHaveLength(2);
    expect(done[0]).toMatchObject({ dispatched: true });
    // a tick right after the clear finds nothing to do twice
    expect(await h.engine.clearDeferrals(['book'])).toBe(0);
    expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'active')).toEqual({ wait: 0, delayed: 0, active: 0 });
  });

  it('starts a fresh chain: the deferral count after a clear starts again at 1', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 }, limits: { maxCapacityDeferrals: 1 } });
    const a = ref('book', 'ch', 'sc');
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(a, {});
    const worker = h.engine.createWorker();
    const failed: string[] = [];
    worker.on('failed', (_j, e) => failed.push(e.message));
    expect(await h.engine.clearDeferrals(['book'])).toBe(1);
    await waitFor(() => h.journal.length === 2, 'deferred again after the clear');
    expect(h.journal[1]!.event).toMatchObject({ deferrals: 1 });
    expect(failed).toEqual([]);
    expect(await h.engine.isStageDeferred(a)).toBe(true);
  });

  it('rejects an empty or malformed scope with a typed error', async () => {
    const h = harness();
    await expect(h.engine.clearDeferrals([])).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    await expect(h.engine.clearDeferrals(['a', ''])).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
  });
});
