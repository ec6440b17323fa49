import { checkPayload } from '../../../src/payload';
import { InvalidPayloadError } from '../../../src/errors';

/**
 * The refusals of checkPayload (src/payload.ts) that the engine suites check by their code only:
 * here by their whole message, which names what was refused and where. Pure: no Redis.
 */
const said = (what: string, at = 'the payload') =>
  `Expected a payload that survives JSON as it is, got ${what} at ${at}`;

class Scenes extends Array<string> {}

describe('C22: INVALID_PAYLOAD names the refused value and where it is', () => {
  it.each([
    ['a lone UTF-16 surrogate, anywhere', { a: { b: 'cut \uD83D' } }, said('a string with a lone UTF-16 surrogate')],
    ['a Proxy, by its path', { a: new Proxy({}, {}) }, said('a Proxy', 'a')],
    ['an Array subclass, by its class', { a: Scenes.from(['s-1']) }, said('a Scenes', 'a')],
    [
      'an array whose prototype has no constructor',
      { a: Object.setPrototypeOf([1], Object.create(null) as object) as unknown },
      said('a Array subclass', 'a'),
    ],
  ])('%s', (_, payload, message) => {
    // its class, its code, and its whole message (an error given to toThrow is compared by message)
    expect(() => checkPayload(payload)).toThrow(InvalidPayloadError);
    expect(() => checkPayload(payload)).toThrow(expect.objectContaining({ code: 'INVALID_PAYLOAD' }));
    expect(() => checkPayload(payload)).toThrow(new Error(message));
  });
});
