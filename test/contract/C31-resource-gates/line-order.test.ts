import { createDispatchEngine, dispatched, InvalidOptionsError, noCapacity, type StageRef } from '../../../src';
import { harness, type Harness } from '../../helpers/engine';
import { redisOptions } from '../../helpers/redis';

/**
 * `lineOrder: 'roundRobin'` wakes a resource's line one book (first scope segment) at a time, so a
 * book with many stages waiting does not starve the others; `'oldest'` (the default) wakes oldest first.
 */
const stage = (book: string, n: number): StageRef => ({ scope: [book, `sc-${n}`], stage: 'image' });
const gpu = () => 'gpu';
const short = (r: StageRef) => `${r.scope[0]}/${r.scope[1]}`;

/** Book `a` closes the gate and waits with 30 stages, then books `b` and `c` with 3 each, in that order. */
async function lineOf30x3x3(h: Harness): Promise<void> {
  h.executor.script(stage('a', 1), noCapacity());
  await h.engine.dispatchStage(stage('a', 1), {});
  for (let i = 2; i <= 30; i++) await h.engine.dispatchStage(stage('a', i), {});
  for (const book of ['b', 'c']) for (let i = 1; i <= 3; i++) await h.engine.dispatchStage(stage(book, i), {});
  expect(h.executor.calls).toHaveLength(1);
}

const opts = { resourceOf: gpu, windows: { capacitySeconds: 60, jitter: 0 } };

describe('C31: lineOrder roundRobin wakes the line one book at a time', () => {
  it('with books of 30, 3 and 3 waiting, a wake of 3 wakes one stage of each book, its oldest', async () => {
    const h = harness({ ...opts, lineOrder: 'roundRobin' });
    await lineOf30x3x3(h);
    const r = await h.engine.wakeDeferred({ resource: 'gpu', limit: 3 });
    expect(r.woken.map(short)).toEqual(['a/sc-1', 'b/sc-1', 'c/sc-1']);
  });

  it('books wake in name order, not in the order their stages began waiting', async () => {
    const h = harness({ ...opts, lineOrder: 'roundRobin' });
    h.executor.script(stage('c', 1), noCapacity());
    for (const book of ['c', 'a', 'b']) await h.engine.dispatchStage(stage(book, 1), {});
    const r = await h.engine.wakeDeferred({ resource: 'gpu', limit: 3 });
    expect(r.woken.map(short)).toEqual(['a/sc-1', 'b/sc-1', 'c/sc-1']);
  });

  it('wakes of one take turns: each begins at the book after the one the last wake ended on', async () => {
    const h = harness({ ...opts, lineOrder: 'roundRobin' });
    await lineOf30x3x3(h);
    const woken: string[] = [];
    for (let i = 0; i < 7; i++)
      woken.push(...(await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 })).woken.map(short));
    expect(woken).toEqual(['a/sc-1', 'b/sc-1', 'c/sc-1', 'a/sc-2', 'b/sc-2', 'c/sc-2', 'a/sc-3']);
  });

  it('a larger wake goes round again, books in name order', async () => {
    const h = harness({ ...opts, lineOrder: 'roundRobin' });
    await lineOf30x3x3(h);
    const r = await h.engine.wakeDeferred({ resource: 'gpu', limit: 11 });
    expect(r.woken.map(short)).toEqual([
      ...['a/sc-1', 'b/sc-1', 'c/sc-1'],
      ...['a/sc-2', 'b/sc-2', 'c/sc-2'],
      ...['a/sc-3', 'b/sc-3', 'c/sc-3'],
      ...['a/sc-4', 'a/sc-5'],
    ]);
    // the next wake starts where the line now stands: b and c are spent
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 2 })).woken.map(short)).toEqual(['a/sc-6', 'a/sc-7']);
  });

  it("a success's capacityLeft wakes round robin too", async () => {
    const h = harness({ ...opts, lineOrder: 'roundRobin' });
    const woken: StageRef[] = [];
    h.engine.on('woken', (e) => woken.push(e.ref));
    await lineOf30x3x3(h);
    // (a wake of one opens the gate: a stage of a fourth book is dispatched and sees 3 slots free)
    await h.engine.wakeDeferred({ resource: 'gpu', limit: 1 });
    h.executor.script(stage('d', 1), dispatched(1, { capacityLeft: 3 }));
    expect(await h.engine.dispatchStage(stage('d', 1), {})).toMatchObject({ dispatched: true });
    expect(woken.map(short)).toEqual(['a/sc-1', 'b/sc-1', 'c/sc-1', 'a/sc-2']);
  });
});

describe('C31: lineOrder oldest (the default) wakes oldest first', () => {
  it('with books of 30, 3 and 3 waiting, a wake of 3 wakes the three oldest, all of the first book', async () => {
    const h = harness(opts);
    await lineOf30x3x3(h);
    const r = await h.engine.wakeDeferred({ resource: 'gpu', limit: 3 });
    expect(r.woken.map(short)).toEqual(['a/sc-1', 'a/sc-2', 'a/sc-3']);
  });
});

describe('C31: a lineOrder that is neither is refused', () => {
  it.each([['fair'], [''], [1]])('%j is InvalidOptionsError, naming the choices', (bad) => {
    const create = () =>
      createDispatchEngine({
        connection: redisOptions(),
        lineOrder: bad as 'oldest',
        executor: async () => noCapacity(),
      });
    expect(create).toThrow(InvalidOptionsError);
    expect(create).toThrow("Expected `lineOrder`: 'oldest' or 'roundRobin'");
  });
});
