import { stageId, type DeferredPage, type StageRef } from '../../../src';
import { listStages } from '../../../src/store/listing';
import { StoreKeys } from '../../../src/store/keys';
import { ioReader, type Cmd, type Reader } from '../../../src/store/reader';
import { harness, LONG_WINDOWS, notSent } from '../../helpers/engine';

/** Check of 's listDeferred pages. */
const long = { windows: LONG_WINDOWS };
const NO = notSent('no_worker_available');

/** A Reader that counts its round trips (one `run` with at least one command is one pipeline sent). */
function counting(inner: Reader): Reader & { trips: number; commands: Cmd[] } {
  const self = {
    trips: 0,
    commands: [] as Cmd[],
    async run(commands: readonly Cmd[]) {
      if (commands.length > 0) self.trips++;
      self.commands.push(...commands);
      return inner.run(commands);
    },
  };
  return self;
}

describe('C28: listDeferred pages', () => {
  it('a page of 1 over 1,000 licences that are not deferred costs a few round trips, not one per licence', async () => {
    const h = harness(long);
    const keys = new StoreKeys(h.prefix, h.queueName);
    // licences whose stage is not deferred right now (a wake-up due and waiting for a worker, a
    // record of a failed job kept by BullMQ): they sit in the index without a marker
    const members = Array.from(
      { length: 1000 },
      (_, i) => `a/s-${String(i).padStart(4, '0')}/image@cap.1.0.0.${(1e12).toString(36)}abcd`,
    );
    for (let i = 0; i < members.length; i += 200)
      await h.redis.zadd(keys.index, ...members.slice(i, i + 200).flatMap((m) => [0, m]));
    h.executor.fallback = NO;
    const live: StageRef = { scope: ['z'], stage: 'image' };
    await h.engine.dispatchStage(live, {});

    const reader = counting(ioReader(h.redis));
    const first = await listStages(reader, keys, '', { limit: 1 });
    // the bounded page: 1,000 licences read, none deferred, a cursor to go on from
    expect(first.stages).toEqual([]);
    expect(first.nextCursor).not.toBeNull();
    // SCAN-like work is a few pipelines of a few hundred licences, not 2 round trips per licence
    expect(reader.trips).toBeLessThanOrEqual(20);
    const rest = await listStages(reader, keys, '', { limit: 1, cursor: first.nextCursor! });
    expect(rest.stages.map((s) => s.ref)).toEqual([live]);
  });

  it('a stage listed on one page and re-deferred before the next page is not listed a second time', async () => {
    const h = harness({ windows: LONG_WINDOWS });
    h.executor.fallback = NO;
    const a: StageRef = { scope: ['p', 'a'], stage: 'image' };
    const b: StageRef = { scope: ['p', 'b'], stage: 'image' };
    await h.engine.dispatchStage(a, {});
    await h.engine.dispatchStage(b, {});
    const first: DeferredPage = await h.engine.listDeferred(['p'], { limit: 1 });
    expect(first.stages.map((s) => s.ref)).toEqual([a]);
    // between the pages, a's window ends (its marker goes, as at its end) and a new attempt defers it
    // again: its new licence (`…@cap.2…`) sorts after the cursor (`…@cap.1…`), inside a's own block
    await h.redis.del(h.engine.deferredStageKey(a));
    await h.engine.dispatchStage(a, {});
    const rows = [...first.stages];
    let cursor = first.nextCursor;
    while (cursor !== null) {
      const page: DeferredPage = await h.engine.listDeferred(['p'], { limit: 1, cursor });
      rows.push(...page.stages);
      cursor = page.nextCursor;
    }
    // every stage deferred throughout the listing once, as the docs promise ("walk every deferred stage once")
    expect(rows.map((s) => stageId(s.ref))).toEqual([stageId(a), stageId(b)]);
  });

  it('a page cut by its budget inside a stage (at a failed-job record, its licence next) neither skips nor repeats that stage', async () => {
    const h = harness(long);
    const keys = new StoreKeys(h.prefix, h.queueName);
    const t = (1e12).toString(36);
    // 999 licences not deferred, then stage b's record of a failed job, which sorts before b's licence
    const fillers = Array.from({ length: 999 }, (_, i) => `a/s-${String(i).padStart(4, '0')}/image@cap.1.0.0.${t}abcd`);
    for (let i = 0; i < fillers.length; i += 200)
      await h.redis.zadd(keys.index, ...fillers.slice(i, i + 200).flatMap((m) => [0, m]));
    await h.redis.zadd(keys.index, 0, `b/x/image@cap.0.0.0.${t}abcd?`);
    h.executor.fallback = NO;
    const b: StageRef = { scope: ['b', 'x'], stage: 'image' };
    const c: StageRef = { scope: ['c', 'x'], stage: 'image' };
    await h.engine.dispatchStage(b, {});
    await h.engine.dispatchStage(c, {});
    const rows: StageRef[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: DeferredPage = await h.engine.listDeferred(undefined, { limit: 1, cursor });
      rows.push(...page.stages.map((s) => s.ref));
      cursor = page.nextCursor;
    } while (cursor !== null && ++pages < 10);
    expect(rows).toEqual([b, c]);
  });

  it('book-1 pages never reach book-10, unicode and special-character ids page through, and a cursor with lex-range characters is taken literally', async () => {
    const h = harness(long);
    h.executor.fallback = NO;
    const inside: StageRef[] = [
      { scope: ['book-1', 'ch'], stage: 'image' },
      { scope: ['book-1', '(x'], stage: '[y' },
      { scope: ['book-1', 'é\u{1F600}'], stage: '-+:@' },
      { scope: ['book-1'], stage: 'ÿ' },
    ];
    const outside: StageRef[] = [
      { scope: ['book-10'], stage: 'image' },
      { scope: ['book-1x'], stage: 'image' },
      { scope: ['book-'], stage: '1' },
    ];
    for (const r of [...inside, ...outside]) await h.engine.dispatchStage(r, {});
    const rows: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: DeferredPage = await h.engine.listDeferred(['book-1'], { limit: 1, cursor });
      rows.push(...page.stages.map((s) => stageId(s.ref)));
      cursor = page.nextCursor;
    } while (cursor !== null && ++pages < 20);
    expect(rows).toEqual(inside.map(stageId).sort());
    // a cursor made of lex-range characters: read as a string after which to list, nothing more
    for (const c of ['book-1/[@', 'book-1/(@', 'book-1/-@+', 'book-1/\xff@', 'book-1/\u{10ffff}@']) {
      const page = await h.engine.listDeferred(['book-1'], { limit: 10, cursor: c });
      for (const s of page.stages) expect(stageId(s.ref).startsWith('book-1/')).toBe(true);
    }
  });
});
