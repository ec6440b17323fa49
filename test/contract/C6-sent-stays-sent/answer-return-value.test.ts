import { checkExecutorResult } from '../../../src/answer';
import { InvalidExecutorResultError } from '../../../src';
import { MAX_STORED_ANSWER, returnValueFor, stored } from '../../helpers/answers';
import { thrown } from '../../helpers/thrown';

/**
 * Mutation run T17's survivors (docs/testing.md): the exact boundaries of how an executor's
 * answer becomes the job's return value (`isFlat`, `storable` in src/bullmq/processor.ts), of
 * how an error message shows a value (`shown`, `stringOf`: 200 characters and an ellipsis) and
 * of how the answer is read once (`readAnswer` in src/dispatch.ts). No Redis: the processor runs
 * with a fake dispatcher (test/helpers/answers.ts).
 */

/** An answer with `n` fields in all, every one flat. */
function fields(n: number): Record<string, unknown> {
  const answer: Record<string, unknown> = { dispatched: true, jobs: 1, reason: null };
  for (let i = 3; i < n; i++) answer[`f${i}`] = i;
  return answer;
}

/** The message a refused answer throws. */
const refusal = (answer: unknown): string =>
  thrown(() => checkExecutorResult(answer), InvalidExecutorResultError)?.message ?? 'the answer was accepted';

const FLAT_CHARS = MAX_STORED_ANSWER / 8;

describe('C6: the job return value of an executor answer (isFlat, storable)', () => {
  it('an answer of 64 flat fields is kept as it is; one of 65 goes through the JSON copy', async () => {
    expect((await stored(fields(64))).copied).toBe(false);
    const more = await stored(fields(65));
    expect(more.copied).toBe(true);
    expect(more.rv.result).toEqual(fields(65));
  });

  it('an answer whose keys and strings hold 131,071 characters is kept as it is; 131,072 go through the JSON copy', async () => {
    // 'dispatched' + 'jobs' + 'reason' + 's' = 21 characters of keys
    const at = (chars: number) => ({ dispatched: true, jobs: 1, reason: null, s: 'x'.repeat(chars - 21) });
    expect((await stored(at(FLAT_CHARS - 1))).copied).toBe(false);
    const over = await stored(at(FLAT_CHARS));
    expect(over.copied).toBe(true);
    expect(over.rv.result).toEqual(at(FLAT_CHARS));
  });

  it('booleans, null, strings and finite numbers are flat; -0, NaN, Infinity, undefined and objects are not', async () => {
    for (const v of [true, false, null, 'text', 0, -1.5, 1e300])
      expect([v, (await stored({ dispatched: true, jobs: 1, reason: null, v })).copied]).toEqual([v, false]);
    for (const v of [-0, NaN, Infinity, -Infinity, undefined, { a: 1 }, [1]]) {
      const { rv, copied } = await stored({ dispatched: true, jobs: 1, reason: null, v });
      expect([v, copied]).toEqual([v, true]);
      // the JSON round trip: what BullMQ stores and any reader gets back
      expect(rv.result).toEqual(JSON.parse(JSON.stringify({ dispatched: true, jobs: 1, reason: null, v })));
    }
  });

  it('an answer of exactly 1 MiB of JSON is kept; one character more is left out of the return value', async () => {
    const base = { dispatched: true, jobs: 1, reason: null, o: { s: '' } };
    const pad = MAX_STORED_ANSWER - JSON.stringify(base).length;
    const exact = { ...base, o: { s: 'x'.repeat(pad) } };
    expect(JSON.stringify(exact).length).toBe(MAX_STORED_ANSWER);
    expect((await returnValueFor(exact)).result).toEqual(exact);
    const over = { ...base, o: { s: 'x'.repeat(pad + 1) } };
    const rv = await returnValueFor(over);
    expect(rv.dispatched).toBe(true);
    expect('result' in rv).toBe(false);
  });

  it('an answer JSON cannot hold (a BigInt) is left out of the return value, the dispatch stands', async () => {
    const rv = await returnValueFor({ dispatched: true, jobs: 1, reason: null, big: 10n });
    expect(rv).toEqual({ dispatched: true, reason: null, retryable: false });
  });
});

describe('C6: an error message shows at most 200 characters of a value (shown, stringOf)', () => {
  it('a JSON text of 200 characters is shown whole; one of 201 is cut at 200 with an ellipsis', () => {
    // JSON of a string: its quotes take 2 characters
    expect(refusal({ dispatched: 'd'.repeat(198), jobs: 1, reason: null })).toMatch(
      new RegExp(`got "${'d'.repeat(198)}"$`),
    );
    expect(refusal({ dispatched: 'd'.repeat(199), jobs: 1, reason: null })).toMatch(
      new RegExp(`got "${'d'.repeat(199)}…$`),
    );
  });

  it("a value JSON cannot hold is shown by its string, cut the same way; one that has no string is '<unprintable>'", () => {
    expect(refusal({ dispatched: 10n ** 250n, jobs: 1, reason: null })).toMatch(
      new RegExp(`got 1${'0'.repeat(199)}…$`),
    );
    expect(refusal({ dispatched: 10n ** 199n, jobs: 1, reason: null })).toMatch(new RegExp(`got 1${'0'.repeat(199)}$`));
    expect(refusal({ dispatched: Symbol('s'), jobs: 1, reason: null })).toMatch(/got Symbol\(s\)$/);
    const noString = Object.create(null) as object;
    expect(refusal({ dispatched: false, jobs: noString, reason: null })).toMatch(/got \{\}$/);
    const throwing = {
      toJSON: () => {
        throw new Error('no JSON');
      },
      toString: () => {
        throw new Error('no string');
      },
    };
    expect(refusal({ dispatched: throwing, jobs: 1, reason: null })).toMatch(/got <unprintable>$/);
  });

  it("a retryAfterMs of 200 characters' string is shown whole; of 201, cut with an ellipsis", () => {
    const capacity = (retryAfterMs: unknown) => ({
      dispatched: false,
      jobs: 0,
      reason: 'no_worker_available',
      retryAfterMs,
    });
    expect(refusal(capacity('9'.repeat(200)))).toMatch(new RegExp(`got ${'9'.repeat(200)}$`));
    expect(refusal(capacity('9'.repeat(201)))).toMatch(new RegExp(`got ${'9'.repeat(200)}…$`));
    const noString = {
      toString: () => {
        throw new Error('no string');
      },
    };
    expect(refusal(capacity(noString))).toMatch(/got <unprintable>$/);
  });
});

describe('C6: the answer is read once (readAnswer)', () => {
  it("a Proxy that refuses to list its keys is read field by field: the engine's fields still count", () => {
    const target = { dispatched: true, jobs: 2, reason: null };
    const proxy = new Proxy(target, {
      ownKeys() {
        throw new Error('no keys');
      },
    });
    const { raw } = checkExecutorResult(proxy);
    expect(raw).toEqual({ dispatched: true, jobs: 2, reason: null });
  });

  it('a field Object.prototype has (constructor, __proto__) is copied as an own field, the copy a plain object', () => {
    const answer = JSON.parse(
      '{"dispatched":true,"jobs":1,"reason":null,"__proto__":{"x":1},"constructor":7}',
    ) as object;
    const { raw } = checkExecutorResult(answer);
    expect(Object.getPrototypeOf(raw)).toBe(Object.prototype);
    expect(Object.hasOwn(raw, '__proto__')).toBe(true);
    expect((raw as unknown as Record<string, unknown>).constructor).toBe(7);
    expect((raw as unknown as { x?: number }).x).toBeUndefined();
  });

  it('an engine field that is absent is not copied; one set to undefined by the executor is', () => {
    const { raw } = checkExecutorResult({ dispatched: true, jobs: 1, reason: null, retryable: undefined });
    expect(Object.keys(raw)).toEqual(['dispatched', 'jobs', 'reason', 'retryable']);
    const { raw: bare } = checkExecutorResult({ dispatched: true, jobs: 1, reason: null });
    expect(Object.keys(bare)).toEqual(['dispatched', 'jobs', 'reason']);
  });
});
