import { stageId, type DeferredPage, type StageRef } from '../../../src';
import { failedForGood } from '../../helpers/attempts';
import { harness, LONG_WINDOWS, notSent } from '../../helpers/engine';

/** What a `listDeferred` page holds: each deferred stage once, at most `limit` of them, as many as its work bound allows. */
const long = { windows: LONG_WINDOWS };
const ref = (book: string, i: number): StageRef => ({
  scope: [book, `s-${String(i).padStart(4, '0')}`],
  stage: 'image',
});

/** Defers `n` stages of `book` (`no_worker_available`); with `clear`, then ends their deferrals (they stay in the index as fresh chains). */
async function defer(h: ReturnType<typeof harness>, book: string, n: number, clear = false): Promise<StageRef[]> {
  h.executor.fallback = notSent('no_worker_available');
  const refs = Array.from({ length: n }, (_, i) => ref(book, i));
  for (let i = 0; i < refs.length; i += 50)
    await Promise.all(refs.slice(i, i + 50).map((r) => h.engine.dispatchStage(r, {})));
  if (clear) expect(await h.engine.clearDeferrals([book])).toBe(n);
  return refs;
}

describe('C28: listDeferred rows and pages', () => {
  it('a stage deferred again after a job of it failed for good is listed once, with its live wake-up', async () => {
    const { h, worker } = await failedForGood(600);
    await worker.close();
    const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
    expect(await h.engine.queue.getJobCounts('failed')).toEqual({ failed: 1 });
    // (a window of 10 min: the rows are read while it is open, however slow the machine)
    h.executor.fallback = notSent('no_worker_available', { retryAfterMs: 600_000 });
    const answer = await h.engine.dispatchStage(image, {});
    expect(answer).toMatchObject({ reason: 'no_worker_available' });
    const [delayed] = await h.engine.queue.getJobs(['delayed']);
    const rows = await h.engine.listDeferred();
    expect(rows.map((r) => [r.ref, r.wakeUpJobId])).toEqual([[image, delayed!.id]]);
  });

  it('a page filled over more than one round of reads holds at most limit stages, and the walk lists each once', async () => {
    const h = harness(long);
    // 2 deferred, then 150 not deferred (the first round reads 100 licences: 2 stages), then 10 deferred
    const a = await defer(h, 'a', 2);
    await defer(h, 'b', 150, true);
    const c = await defer(h, 'c', 10);
    const pages: DeferredPage[] = [];
    let cursor: string | null = null;
    do {
      const page: DeferredPage = await h.engine.listDeferred(undefined, { limit: 5, cursor });
      pages.push(page);
      cursor = page.nextCursor;
    } while (cursor !== null && pages.length < 20);
    expect(pages[0]!.stages).toHaveLength(5);
    for (const p of pages) expect(p.stages.length).toBeLessThanOrEqual(5);
    expect(pages.flatMap((p) => p.stages.map((s) => stageId(s.ref)))).toEqual([...a, ...c].map(stageId));
  });

  it('a page of limit 200 reads up to 2,000 licences (10 × limit): a stage behind 1,200 that are not deferred is on the first page', async () => {
    const h = harness(long);
    await defer(h, 'a', 1200, true);
    const [z] = await defer(h, 'z', 1);
    const page = await h.engine.listDeferred(undefined, { limit: 200 });
    expect(page.stages.map((s) => s.ref)).toEqual([z]);
    expect(page.nextCursor).toBeNull();
  }, 60_000);
});
