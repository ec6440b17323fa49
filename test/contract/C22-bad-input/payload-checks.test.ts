import { checkCall, checkPayload } from '../../../src/payload';
import { windowMax } from '../../../src/windows';
import { InvalidPayloadError } from '../../../src/errors';

/**
 * The checks every dispatch and enqueue runs before anything is called or
 * written (src/dispatch.ts): a payload must come back the same from the job's
 * JSON data, and a call's options must be well typed. Pure: no Redis. Each
 * refusal is checked by its class and its whole message (the message names
 * what was refused and where), as a user reads it.
 */
const refusal = (payload: unknown): string => {
  try {
    checkPayload(payload);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidPayloadError);
    return (error as Error).message;
  }
  throw new Error('the payload was accepted');
};
const said = (what: string, at = 'the payload') =>
  `Expected a payload that survives JSON as it is, got ${what} at ${at}`;

/** `levels` arrays nested in each other around a 0 (the 0 sits at depth `levels`). */
const nested = (levels: number): unknown => {
  let v: unknown = 0;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
};

describe('C22: INVALID_PAYLOAD: checkPayload accepts what JSON keeps as it is', () => {
  it.each([
    ['no payload', undefined],
    ['null', null],
    ['a string, a boolean, 0 and null inside an object', { s: 'x', b: true, f: false, n: null, z: 0 }],
    ['an array', [1, 'a', [true, null]]],
    ['an object without a prototype', Object.assign(Object.create(null) as object, { a: 1 })],
    ['an undefined property (JSON drops it, as the job data will)', { a: undefined, b: 1 }],
    ['the deepest nesting allowed (a value at depth 256)', nested(256)],
  ])('%s', (_, payload) => {
    expect(() => checkPayload(payload)).not.toThrow();
  });

  it('1,000,000 values (the bound itself) pass; one more is refused before anything is written', () => {
    expect(() => checkPayload(new Array<number>(999_999).fill(0))).not.toThrow();
    expect(refusal(new Array<number>(1_000_000).fill(0))).toBe(said('more than 1000000 values'));
  });
});

describe('C22: INVALID_PAYLOAD: checkPayload refuses, naming what and where', () => {
  it.each([
    ['NaN', NaN, said('NaN')],
    ['Infinity', { a: Infinity }, said('Infinity', 'a')],
    ['-0', { a: { b: -0 } }, said('-0', 'a.b')],
    ['a value in an array, by its index', { a: [0, NaN] }, said('NaN', 'a[1]')],
    ['a function', () => 1, said('function')],
    ['a symbol', { s: Symbol('s') }, said('symbol', 's')],
    // eslint-disable-next-line no-sparse-arrays -- the hole is what is refused
    ['an array with a hole', { a: [1, , 3] }, said('an array with holes or named properties', 'a')],
    ['undefined in an array', [1, undefined], said('undefined in an array')],
    ['a Date', { when: new Date(0) }, said('a Date', 'when')],
    ['a Map', new Map(), said('a Map')],
    [
      'an object whose prototype has no constructor',
      Object.create(Object.create(null) as object) as object,
      said('a class instance'),
    ],
    ['a value nested deeper than 256 levels', nested(257), said('more than 256 levels of nesting', '[0]'.repeat(257))],
    [
      'a symbol-keyed field (JSON drops it)',
      { a: { [Symbol('k')]: 1, b: 2 } },
      said('an object with hidden (non-enumerable) or symbol-keyed properties', 'a'),
    ],
    [
      'a non-enumerable field (JSON drops it)',
      { a: Object.defineProperty({ b: 2 }, 'hidden', { value: 1 }) },
      said('an object with hidden (non-enumerable) or symbol-keyed properties', 'a'),
    ],
    [
      'a non-enumerable toJSON (JSON writes its answer instead)',
      Object.defineProperty({ b: 2 }, 'toJSON', { value: () => ({ c: 3 }) }),
      said('an object with hidden (non-enumerable) or symbol-keyed properties'),
    ],
    [
      'an array with a non-enumerable or symbol-keyed property',
      { a: Object.defineProperty([1], Symbol('k'), { value: 1, enumerable: true }) },
      said('an array with hidden or symbol-keyed properties', 'a'),
    ],
  ])('%s', (_, payload, message) => {
    expect(refusal(payload)).toBe(message);
  });

  it('an array with a named property', () => {
    const a = Object.assign([1, 2], { x: 1 });
    expect(refusal({ a })).toBe(said('an array with holes or named properties', 'a'));
  });

  it('what JSON itself cannot hold: a BigInt, a cycle', () => {
    expect(refusal({ n: 1n })).toBe(
      said('what JSON cannot hold (Do not know how to serialize a BigInt)', 'the payload'),
    );
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(refusal(cycle)).toMatch(
      /^Expected a payload that survives JSON as it is, got what JSON cannot hold \(.*circular/,
    );
  });

  // (refused as a getter a review, before it is read a second time; it was refused as a
  // property that throws, when the walk read it again after JSON)
  it('a getter that throws when read a second time (JSON read it once)', () => {
    let reads = 0;
    const payload = {
      get a() {
        if (reads++ > 0) throw new Error('boom');
        return 1;
      },
    };
    expect(refusal(payload)).toBe(said('a getter or setter', 'a'));
  });
});

describe('C22: INVALID_PAYLOAD: checkCall (buildId, force)', () => {
  it.each([
    ['no options', undefined],
    ['both given', { buildId: 'b-1', force: true }],
    ['force false', { force: false }],
  ])('accepts %s', (_, call) => {
    expect(() => checkCall(call as never)).not.toThrow();
  });

  it.each([
    ['null', null, 'Expected the call options to be an object'],
    ['a string', 'x', 'Expected the call options to be an object'],
    ['a numeric buildId', { buildId: 7 }, 'Expected `buildId` to be a string, got number'],
    ['a string force', { force: 'yes' }, 'Expected `force` to be a boolean, got string'],
  ])('refuses %s', (_, call, message) => {
    let error: unknown;
    try {
      checkCall(call as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidPayloadError);
    expect((error as Error).message).toBe(message);
  });
});

describe('C22: the window bounds and the kept chain (pure helpers of src/dispatch.ts)', () => {
  const windows = { capacitySeconds: 30, capacityMaxSeconds: 600, idempotentSeconds: 300, jitter: 0.2 };

  it('windowMax: a class’s longest window, seconds', () => {
    expect(windowMax(windows, 'capacity')).toBe(600);
    expect(windowMax(windows, 'idempotent')).toBe(300);
  });
});
