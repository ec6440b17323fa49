/** A payload and a call's options, checked before anything is called or written. */
import { types } from 'node:util';
import { InvalidPayloadError } from './errors';

/**
 * Checks, before anything is called or written, that a payload comes back
 * the same from the job's JSON data, as the executor sees it after a
 * wake-up: plain objects, arrays, strings, finite numbers, booleans, null
 * (an `undefined` property is dropped, as JSON drops it). A BigInt, a cycle,
 * a Map, a Set, a Date, NaN, a function or a class instance is refused.
 */
export function checkPayload(payload: unknown): void {
  if (payload === undefined) return;
  const fail = (what: string, path: string): never => {
    throw new InvalidPayloadError(
      `Expected a payload that survives JSON as it is, got ${what} at ${path || 'the payload'}`,
    );
  };
  // JSON itself first: a cycle, a BigInt, a getter that throws, nesting too deep for it
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (error) {
    fail(`what JSON cannot hold (${(error as Error).message})`, '');
  }
  // a lone UTF-16 surrogate (a string cut mid-emoji) survives JavaScript's JSON, which writes it as
  // an escape, but not Redis' (cjson refuses to read it back: the views would lose the deferral)
  // Stryker disable next-line ConditionalExpression: equivalent: json is undefined only for a function or a symbol, and the pattern never matches the text "undefined"
  if (json !== undefined && LONE_SURROGATE.test(json)) fail('a string with a lone UTF-16 surrogate', '');
  // then the values JSON would change, walked iteratively (no cycle is left) and bounded
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: payload, path: '', depth: 0 }];
  let visited = 0;
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (++visited > MAX_PAYLOAD_NODES) fail(`more than ${MAX_PAYLOAD_NODES} values`, '');
    if (depth > MAX_PAYLOAD_DEPTH) fail(`more than ${MAX_PAYLOAD_DEPTH} levels of nesting`, path);
    if (value === null || typeof value === 'string' || typeof value === 'boolean') continue;
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) fail(String(value), path);
      if (Object.is(value, -0)) fail('-0', path);
      continue;
    }
    if (typeof value !== 'object') fail(typeof value, path);
    const obj = value as object;
    // (a Proxy's traps may answer each read differently: what the check sees is not what JSON
    // and the executor of a direct call get)
    if (types.isProxy(obj)) fail('a Proxy', path);
    const proto = Object.getPrototypeOf(obj) as unknown;
    let entries: [string, unknown][];
    try {
      // every own key, hidden ones too: JSON drops a non-enumerable or symbol-keyed field, and
      // heeds a non-enumerable toJSON (the executor of a wake-up would get another payload)
      const own = Reflect.ownKeys(obj).length;
      if (Array.isArray(obj)) {
        // (an Array subclass: JSON heeds a toJSON it inherits, and the job data keeps a plain array)
        if (proto !== Array.prototype) fail(`a ${obj.constructor?.name ?? 'Array subclass'}`, path);
        const keys = Object.keys(obj);
        if (keys.length !== obj.length) fail('an array with holes or named properties', path);
        if (own !== keys.length + 1) fail('an array with hidden or symbol-keyed properties', path);
        entries = (obj as unknown[]).map((v, i) => [`${path}[${i}]`, v]);
        if (entries.some(([, v]) => v === undefined)) fail('undefined in an array', path);
      } else {
        if (proto !== Object.prototype && proto !== null) fail(`a ${obj.constructor?.name ?? 'class instance'}`, path);
        // (descriptors, not values: a getter would be read again, maybe to another value, by
        // BullMQ's add and by the executor of a direct call)
        const fields = Object.getOwnPropertyDescriptors(obj);
        const keys = Object.keys(fields);
        if (own !== keys.length) fail('an object with hidden (non-enumerable) or symbol-keyed properties', path);
        entries = [];
        for (const k of keys) {
          const field = fields[k]!;
          const at = path ? `${path}.${k}` : k;
          if (!field.enumerable) fail('an object with hidden (non-enumerable) or symbol-keyed properties', path);
          if (field.get || field.set) fail('a getter or setter', at);
          if (field.value !== undefined) entries.push([at, field.value]);
        }
      }
    } catch (error) {
      if (error instanceof InvalidPayloadError) throw error;
      fail(`a property that throws (${(error as Error).message})`, path);
      return;
    }
    for (const [p, v] of entries) stack.push({ value: v, path: p, depth: depth + 1 });
  }
}

/** A `\\uD800`..`\\uDFFF` escape in JSON text (not an escaped backslash before it): JSON.stringify writes a lone surrogate so. */
const LONE_SURROGATE = /(?:^|[^\\])(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/i;

/** Bounds of a payload's shape, checked before anything is written. */
const MAX_PAYLOAD_DEPTH = 256;
const MAX_PAYLOAD_NODES = 1_000_000;

/** Checks a call's options (`buildId`, `force`) before anything is called or written. */
export function checkCall(call: { buildId?: unknown; force?: unknown } | undefined): void {
  if (call === undefined) return;
  if (typeof call !== 'object' || call === null)
    throw new InvalidPayloadError('Expected the call options to be an object');
  if (call.buildId !== undefined && typeof call.buildId !== 'string') {
    throw new InvalidPayloadError(`Expected \`buildId\` to be a string, got ${typeof call.buildId}`);
  }
  // written into the job data as the payload is: Redis' JSON must read it back (see checkPayload)
  if (call.buildId !== undefined && LONE_SURROGATE.test(JSON.stringify(call.buildId))) {
    throw new InvalidPayloadError('Expected `buildId` without a lone UTF-16 surrogate');
  }
  if (call.force !== undefined && typeof call.force !== 'boolean') {
    throw new InvalidPayloadError(`Expected \`force\` to be a boolean, got ${typeof call.force}`);
  }
}
