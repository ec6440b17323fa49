import fc from 'fast-check';
import { formatRefText, parseRefText } from '../../src/cli/ref-text';
import { isStageDeferralError } from '../../src';

// at most 6 units: 9 segments of 'é' (6 characters encoded) stay under the 512-character stage id bound
const segment = fc.string({
  minLength: 1,
  maxLength: 12,
  unit: fc.constantFrom('a', 'Z', '1', '-', '/', ':', '\\', ' ', 'é', '@'),
});

describe('C29: the CLI ref text', () => {
  it('reads what it writes, for any segments (including / : and \\)', () => {
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 8 }), segment, (scope, stage) => {
        const text = formatRefText({ scope, stage });
        expect(parseRefText(text)).toEqual({ scope, stage });
      }),
    );
  });

  it('reads the documented examples', () => {
    expect(parseRefText('book-1/ch-2/sc-7:image')).toEqual({ scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' });
    expect(parseRefText('a\\/b:img')).toEqual({ scope: ['a/b'], stage: 'img' });
    expect(parseRefText('a\\:b/c\\\\:x\\:y')).toEqual({ scope: ['a:b', 'c\\'], stage: 'x:y' });
  });

  it.each([
    ['book-1/ch-2', /expected `<scope>\/<scope>:<stage>`/],
    ['book-1:image:x', /must not contain an unescaped `:`/],
    ['book-1:im/age', /must not contain an unescaped `\/`/],
    [':image', /`scope\[0\]` to be non-empty/],
    ['book-1:', /`stage` to be non-empty/],
    ['a\\b:image', /backslash must be followed by/],
    ['a:image\\', /backslash must be followed by/],
  ])('refuses %j with an InvalidStageRefError', (text, message) => {
    let error: unknown;
    try {
      parseRefText(text);
    } catch (e) {
      error = e;
    }
    expect(isStageDeferralError(error) && error.code).toBe('INVALID_STAGE_REF');
    expect((error as Error).message).toMatch(message);
  });
});
