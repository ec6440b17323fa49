/**
 * The exact bounds of a stage ref and the precedence of not-sent reasons, at
 * their edges (they kill boundary mutants of
 * src/stage-ref.ts and src/outcomes.ts). Pure functions, no Redis.
 */
import { InvalidStageRefError } from '../../../src/errors';
import { classifyNotSentReasons, outcomeClass } from '../../../src/outcomes';
import {
  MAX_SCOPE_SEGMENTS,
  MAX_STAGE_ID_LENGTH,
  parseStageId,
  scopePath,
  scopePrefix,
  stageId,
  stageIdOfJobId,
} from '../../../src/stage-ref';

/** The error `f` throws (or undefined). */
function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  return undefined;
}

describe('C20: stage ref bounds', () => {
  const seg = (n: number) => Array.from({ length: n }, (_, i) => `s${i}`);

  it('a scope holds 1 to MAX_SCOPE_SEGMENTS segments, both ends included', () => {
    expect(MAX_SCOPE_SEGMENTS).toBe(8);
    expect(stageId({ scope: seg(1), stage: 'x' })).toBe('s0/x');
    expect(stageId({ scope: seg(MAX_SCOPE_SEGMENTS), stage: 'x' })).toBe(`${seg(8).join('/')}/x`);
    for (const n of [0, MAX_SCOPE_SEGMENTS + 1]) {
      const e = thrown(() => stageId({ scope: seg(n), stage: 'x' }));
      expect(e).toBeInstanceOf(InvalidStageRefError);
      expect((e as Error).message).toContain(`got ${n}`);
    }
    // a scope prefix given to clear/list follows the same bounds when min is 1, and none below when min is 0
    expect(scopePath([], 'scope', 0)).toEqual([]);
    expect(thrown(() => scopePath([], 'scope', 1))).toBeInstanceOf(InvalidStageRefError);
  });

  it('the encoded id may be exactly MAX_STAGE_ID_LENGTH characters, not one more', () => {
    expect(MAX_STAGE_ID_LENGTH).toBe(512);
    // 'a'.repeat(n) + '/' + 'b' is n + 2 characters
    expect(stageId({ scope: ['a'.repeat(MAX_STAGE_ID_LENGTH - 2)], stage: 'b' })).toHaveLength(MAX_STAGE_ID_LENGTH);
    const e = thrown(() => stageId({ scope: ['a'.repeat(MAX_STAGE_ID_LENGTH - 1)], stage: 'b' }));
    expect(e).toBeInstanceOf(InvalidStageRefError);
    expect((e as Error).message).toContain(`got ${MAX_STAGE_ID_LENGTH + 1}`);
  });

  it('a scope prefix must leave room for a one-character stage', () => {
    // prefix 'a...a/' of n + 1 characters leaves room when n + 2 <= MAX
    expect(scopePrefix(['a'.repeat(MAX_STAGE_ID_LENGTH - 2)])).toBe(`${'a'.repeat(MAX_STAGE_ID_LENGTH - 2)}/`);
    const e = thrown(() => scopePrefix(['a'.repeat(MAX_STAGE_ID_LENGTH - 1)]));
    expect(e).toBeInstanceOf(InvalidStageRefError);
    expect((e as Error).message).toContain(`at most ${MAX_STAGE_ID_LENGTH}`);
    // a bad segment of a scope prefix is named as a scope segment
    expect((thrown(() => scopePrefix(['a', ''])) as Error).message).toContain('`scope[1]`');
    expect(scopePrefix(['book', 'ch 1'])).toBe('book/ch%201/');
  });

  it('an invalid segment is refused with a message naming it', () => {
    const cases: [unknown, string][] = [
      [{ scope: ['ok', ''], stage: 'x' }, '`scope[1]`'],
      [{ scope: ['ok', null], stage: 'x' }, 'null'],
      [{ scope: ['ok', 7], stage: 'x' }, 'number'],
      [{ scope: ['ok'], stage: '' }, '`stage`'],
      [{ scope: ['\ud800'], stage: 'x' }, 'surrogate'],
      [{ scope: 'book', stage: 'x' }, 'array'],
      [null, 'stage ref'],
      ['book/x', 'stage ref'],
    ];
    for (const [ref, named] of cases) {
      const e = thrown(() => stageId(ref as never));
      expect({ ref, e }).toEqual({ ref, e: expect.any(InvalidStageRefError) });
      expect({ ref, message: (e as Error).message }).toEqual({ ref, message: expect.stringContaining(named) });
    }
  });

  it('a job id splits at its first `@` (an id starting with `@` has an empty stage id)', () => {
    expect(stageIdOfJobId('a/b@cap.1')).toBe('a/b');
    expect(stageIdOfJobId('a/b')).toBe('a/b');
    expect(stageIdOfJobId('@x')).toBe('');
    expect(stageIdOfJobId('a@b@c')).toBe('a');
    expect(parseStageId('book%2F1/ch/image')).toEqual({ scope: ['book/1', 'ch'], stage: 'image' });
  });
});

describe('C20: not-sent reasons at their edges', () => {
  const m = (entries: [string, number][]) => new Map(entries);

  it('a tie goes to the listed-first reason whichever comes first in the map', () => {
    expect(
      classifyNotSentReasons(
        m([
          ['no_worker_available', 2],
          ['ambiguous_post', 2],
        ]),
      ),
    ).toBe('no_worker_available');
    expect(
      classifyNotSentReasons(
        m([
          ['duplicate_pending', 3],
          ['already_completed', 3],
        ]),
      ),
    ).toBe('duplicate_pending');
  });

  it('a reason counted 0 (or less, or NaN) is ignored, even a non-deferrable one', () => {
    expect(
      classifyNotSentReasons(
        m([
          ['send_failed', 0],
          ['no_worker_available', 1],
        ]),
      ),
    ).toBe('no_worker_available');
    expect(
      classifyNotSentReasons(
        m([
          ['send_failed', -1],
          ['circuit_open', Number.NaN],
          ['already_completed', 1],
        ]),
      ),
    ).toBe('already_completed');
    expect(classifyNotSentReasons(m([['no_worker_available', 0]]))).toBeNull();
  });

  it('a higher count wins over precedence, whichever comes first', () => {
    expect(
      classifyNotSentReasons(
        m([
          ['already_completed', 3],
          ['no_worker_available', 2],
        ]),
      ),
    ).toBe('already_completed');
    expect(
      classifyNotSentReasons(
        m([
          ['no_worker_available', 2],
          ['already_completed', 3],
        ]),
      ),
    ).toBe('already_completed');
  });

  it('outcomeClass names the class, null for anything else (null and undefined included)', () => {
    expect(outcomeClass('ambiguous_post')).toBe('capacity');
    expect(outcomeClass('already_completed')).toBe('idempotent');
    expect(outcomeClass(null)).toBeNull();
    expect(outcomeClass(undefined)).toBeNull();
    expect(outcomeClass('send_failed')).toBeNull();
  });
});
