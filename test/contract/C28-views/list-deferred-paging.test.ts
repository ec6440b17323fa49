import { InvalidOptionsError, stageId, type DeferredPage, type StageRef } from '../../../src';
import { harness, LONG_WINDOWS, notSent } from '../../helpers/engine';

/** the views scale with the work: `listDeferred(scope?, { limit, cursor })` pages. */
const ref = (book: string, i: number): StageRef => ({
  scope: [book, `s-${String(i).padStart(4, '0')}`],
  stage: 'image',
});
const long = { windows: LONG_WINDOWS };

async function deferMany(h: ReturnType<typeof harness>, book: string, n: number): Promise<StageRef[]> {
  h.executor.fallback = notSent('no_worker_available');
  const refs = Array.from({ length: n }, (_, i) => ref(book, i));
  for (let i = 0; i < refs.length; i += 50)
    await Promise.all(refs.slice(i, i + 50).map((r) => h.engine.dispatchStage(r, {})));
  return refs;
}

async function walk(h: ReturnType<typeof harness>, scope: string[] | undefined, limit: number) {
  const pages: DeferredPage[] = [];
  let cursor: string | null = null;
  do {
    const page: DeferredPage = await h.engine.listDeferred(scope, { limit, cursor });
    pages.push(page);
    cursor = page.nextCursor;
  } while (cursor !== null && pages.length < 100);
  return pages;
}

describe('C28: listDeferred pages', () => {
  it('limit and cursor walk every deferred stage once, in stage-id order, and the last page says null', async () => {
    const h = harness(long);
    const refs = await deferMany(h, 'a', 25);
    await deferMany(h, 'b', 5); // outside the scope
    const pages = await walk(h, ['a'], 10);
    expect(pages.map((p) => p.stages.length)).toEqual([10, 10, 5]);
    expect(pages.at(-1)!.nextCursor).toBeNull();
    const listed = pages.flatMap((p) => p.stages.map((s) => stageId(s.ref)));
    expect(listed).toEqual(refs.map(stageId).sort());
    // every row is a full DeferredStage, as the unpaged call gives it
    const all = await h.engine.listDeferred(['a']);
    expect(pages.flatMap((p) => p.stages).map((s) => ({ ...s, until: 0 }))).toEqual(
      all.map((s) => ({ ...s, until: 0 })),
    );
  });

  it('without a page it still returns the array of every deferred stage (the earlier call shape)', async () => {
    const h = harness(long);
    await deferMany(h, 'a', 3);
    await deferMany(h, 'b', 2);
    const all = await h.engine.listDeferred();
    expect(Array.isArray(all)).toBe(true);
    expect(all).toHaveLength(5);
    expect(await h.engine.listDeferred(['b'])).toHaveLength(2);
    expect((await h.engine.listDeferred(undefined, { limit: 2 })).stages).toHaveLength(2);
  });

  it('a page skips stages that are not deferred and bounds its work: fewer rows than limit, with a cursor', async () => {
    const h = harness(long);
    await deferMany(h, 'a', 1100);
    // cleared: 1,100 licences stay in the index (fresh chains), none of them deferred
    expect(await h.engine.clearDeferrals(['a'])).toBe(1100);
    const [last] = await deferMany(h, 'z', 1);
    const first = await h.engine.listDeferred(undefined, { limit: 5 });
    // a page reads at most max(10 × limit, 1000) licences: none of those was deferred
    expect(first.stages).toEqual([]);
    expect(first.nextCursor).not.toBeNull();
    const rest = await h.engine.listDeferred(undefined, { limit: 5, cursor: first.nextCursor });
    expect(rest.stages.map((s) => s.ref)).toEqual([last]);
    expect(rest.nextCursor).toBeNull();
  }, 60_000);

  it.each([
    ['limit 0', { limit: 0 }],
    ['limit 10001', { limit: 10_001 }],
    ['limit 1.5', { limit: 1.5 }],
    ['no limit', {}],
    ['a cursor from another scope', { limit: 5, cursor: 'b/s-0001/image@cap.1.0.0.x' }],
    ['a cursor that is no licence', { limit: 5, cursor: 'a/anything' }],
  ])('a bad page (%s) is InvalidOptionsError, before any read', async (_name, page) => {
    const h = harness(long);
    await expect(h.engine.listDeferred(['a'], page as never)).rejects.toBeInstanceOf(InvalidOptionsError);
  });
});
