import fc from 'fast-check';
import { escapeControl } from '../../src/cli/escape';
import { redactUrl, scrub, secretsOf } from '../../src/cli/redact';
import { formatRefText, parseRefText } from '../../src/cli/ref-text';

describe('C29: credentials are masked in every form', () => {
  it.each([
    ['redis://:pw1@h:6379', 'redis://:***@h:6379'],
    ['redis://u:pw2@h:6379/0', 'redis://u:***@h:6379/0'],
    ['redis://h:6379/?password=pw3', 'redis://h:6379/?password=***'],
    ['rediss://h:6380?db=2&sentinelPassword=pw4', 'rediss://h:6380?db=2&sentinelPassword=***'],
    ['redis://a:1?password=pw5,redis://b:2', 'redis://a:1?password=***,redis://b:2'],
    ['not a url //u:pw6@h?password=pw7', 'not a url //***@h?password=***'],
  ])('redactUrl(%s) is %s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });

  it('scrub removes each secret, as written and decoded, from any text', () => {
    const secrets = secretsOf('redis://h:1?password=p%40ss%20word&token=tok');
    expect(scrub('AUTH p@ss word failed; p%40ss%20word; tok', secrets)).toBe('AUTH *** failed; ***; ***');
  });
});

describe('C29: control characters', () => {
  it('escapeControl leaves no control, separator or bidi character', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        // eslint-disable-next-line no-control-regex
        expect(escapeControl(s)).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
      }),
    );
    expect(escapeControl('a\x1b[31mb\nc\td\u202e')).toBe('a\\u001b[31mb\\nc\\td\\u202e');
  });

  it('an escaped ref text reads back as the same ref', () => {
    const unit = fc.constantFrom('a', '/', ':', '\\', 'n', 'u', '\n', '\x1b', '\t', '\r', '\u009b', '\u2028', '\u202e');
    const segment = fc.string({ minLength: 1, maxLength: 10, unit });
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 4 }), segment, (scope, stage) => {
        expect(parseRefText(escapeControl(formatRefText({ scope, stage })))).toEqual({ scope, stage });
      }),
    );
  });
});
