import type { DispatchEngine } from '../../../src';
import { harness, notSent } from '../../helpers/engine';

const WAKE_SHAPE = 'Expected `wakeDeferred` to get `{ limit?, scope?, stage? }`';
const PAGE_SHAPE = 'Expected `listDeferred` to get `{ limit, cursor? }` as its page';

describe('C22: wakeDeferred and listDeferred refuse a malformed argument, with its own message', () => {
  const ref = (s: string) => ({ scope: ['book-14', s], stage: 'image' });

  it.each([
    ['wakeDeferred(5)', (e: DispatchEngine) => e.wakeDeferred(5 as never), WAKE_SHAPE],
    ['wakeDeferred(null)', (e: DispatchEngine) => e.wakeDeferred(null as never), WAKE_SHAPE],
    ['listDeferred(scope, 5)', (e: DispatchEngine) => e.listDeferred(['book-14'], 5 as never), PAGE_SHAPE],
    ['listDeferred(scope, null)', (e: DispatchEngine) => e.listDeferred(['book-14'], null as never), PAGE_SHAPE],
  ])('%s is INVALID_OPTIONS naming the shape it takes', async (_what, call, message) => {
    const h = harness();
    await expect(call(h.engine)).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message });
  });

  it('wakeDeferred takes a limit of exactly 10,000 and says which limit it refused', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(ref('a'), {});
    expect(await h.engine.wakeDeferred({ limit: 10_000 })).toEqual({ woken: [ref('a')] });
    await expect(h.engine.wakeDeferred({ limit: 0 })).rejects.toThrow(
      'Expected `limit` to be an integer 1..10000, got 0',
    );
  });

  it('a page limit of exactly 1 and of exactly 10,000 is taken; the refusals name the value', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(ref('a'), {});
    await h.engine.dispatchStage(ref('b'), {});
    const one = await h.engine.listDeferred(['book-14'], { limit: 1 });
    expect(one.stages.map((s) => s.ref)).toEqual([ref('a')]);
    const all = await h.engine.listDeferred(['book-14'], { limit: 10_000 });
    expect(all.stages.map((s) => s.ref)).toEqual([ref('a'), ref('b')]);
    await expect(h.engine.listDeferred(['book-14'], { limit: 10_001 })).rejects.toThrow(
      'Expected `limit` to be an integer from 1 to 10000, got 10001',
    );
    await expect(h.engine.listDeferred(['book-14'], { limit: 1, cursor: 'nope' })).rejects.toThrow(
      'Expected `cursor` to be a `nextCursor` of this listing, got "nope"',
    );
  });
});
