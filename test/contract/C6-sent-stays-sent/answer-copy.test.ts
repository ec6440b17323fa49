import { harness } from '../../helpers/engine';
import { checkExecutorResult } from '../../../src/answer';
import { InvalidExecutorResultError, type ExecutorResult, type StageRef } from '../../../src';

/**
 * The plain copy commit 994478d makes of the executor's answer
 * (`readAnswer`, src/dispatch.ts), by `answer[key] = v` for each own enumerable key.
 *  - An own key `__proto__` (what `JSON.parse` of a downstream's response body makes, kept by
 *    a spread `{ ...body }`) is not copied as a field: the assignment SETS THE COPY'S PROTOTYPE.
 *    The engine then reads the answer's fields off that prototype: an answer that never said
 *    `dispatched` (invalid: a failure, retried) is taken for a dispatch, and the stage is lost.
 *  - `keys.includes(key)` runs for every key whose value is undefined: quadratic in them.
 *  - storable's comment (src/bullmq/processor.ts) says "a direct `dispatchStage` still returns
 *    it whole"; it returns the copy: a class answer's prototype getters, its class, and symbol
 *    keys are gone from `DispatchResult.result`.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C6: the plain copy of the answer', () => {
  it('an answer with an own `__proto__` key and no `dispatched` is not a dispatch (INVALID_EXECUTOR_RESULT)', async () => {
    const h = harness();
    // a downstream's JSON body: it says nothing of `dispatched` at its top level
    const body = JSON.parse('{"jobs":0,"reason":"capacity","__proto__":{"dispatched":true}}') as ExecutorResult<string>;
    expect(Object.hasOwn(body, 'dispatched')).toBe(false);
    expect((body as { dispatched?: unknown }).dispatched).toBeUndefined();
    h.executor.script(image, async () => ({ ...body }));
    const r = await h.engine.dispatchStage(image, {}).then(
      (v) => ({ resolved: v.dispatched }),
      (e: unknown) => ({ rejected: e instanceof InvalidExecutorResultError }),
    );
    // `dispatched` is undefined on the executor's object: InvalidExecutorResultError, not a dispatch
    expect(r).toEqual({ rejected: true });
  });

  it('the copy of an answer keeps an own `__proto__` key as a field', () => {
    const body = JSON.parse(
      '{"dispatched":true,"jobs":1,"reason":null,"__proto__":{"region":"eu"}}',
    ) as ExecutorResult<string>;
    const { raw } = checkExecutorResult(body);
    expect(JSON.stringify(raw)).toBe(JSON.stringify(body));
  });

  it('reading an answer is linear in its keys, undefined values too', () => {
    const many = (value: (i: number) => unknown) => {
      const o: Record<string, unknown> = { dispatched: true, jobs: 1, reason: null };
      for (let i = 0; i < 60_000; i++) o[`k${i}`] = value(i);
      return o;
    };
    const time = (o: unknown) => {
      const s = performance.now();
      checkExecutorResult(o);
      return performance.now() - s;
    };
    const defined = time(many((i) => i));
    const undef = time(many(() => undefined));
    // the same number of keys: a linear read costs about the same either way (measured ~60 ms vs ~3 s)
    expect(undef).toBeLessThan(Math.max(500, 10 * defined));
  });

  it("a direct dispatchStage returns the engine's copy of the answer: its own string-keyed fields, read once (no class, prototype getter or symbol key)", async () => {
    const h = harness();
    const trace = Symbol('trace');
    class Receipt {
      dispatched = true as const;
      jobs = 1;
      reason = null;
      [trace] = 'span-9';
      constructor(private readonly body: { id: string }) {}
      get renderId(): string {
        return this.body.id;
      }
    }
    h.executor.script(image, async () => new Receipt({ id: 'render-42' }) as unknown as ExecutorResult<string>);
    const r = await h.engine.dispatchStage(image, {});
    const got = r.result as unknown as Receipt & Record<symbol, unknown>;
    expect({ isReceipt: got instanceof Receipt, renderId: got.renderId, trace: got[trace] }).toEqual({
      isReceipt: false,
      renderId: undefined,
      trace: undefined,
    });
    expect(got).toEqual({ dispatched: true, jobs: 1, reason: null, body: { id: 'render-42' } });
  });
});

describe('C6: an answer whose `dispatched` cannot be read', () => {
  it('a `dispatched` getter that throws is reported by its throw', () => {
    const answer = {
      get dispatched(): boolean {
        throw new Error('response body already consumed');
      },
      jobs: 1,
      reason: null,
    };
    let message = '';
    try {
      checkExecutorResult(answer);
    } catch (e) {
      message = (e as Error).message;
    }
    // readAnswer recorded `dispatched: response body already consumed`; the check above it wins
    expect(message).toContain('response body already consumed');
  });
});
