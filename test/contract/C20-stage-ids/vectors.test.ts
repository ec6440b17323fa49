import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidStageRefError, MAX_SCOPE_SEGMENTS, MAX_STAGE_ID_LENGTH, parseStageId, stageId } from '../../../src';

/**
 * the stage-id encoding as test vectors (test/vectors/stage-ids.json,
 * shipped), the spec a producer in another language checks its encoder
 * against (test/python/test_vectors.py runs the same file).
 */
interface Vectors {
  maxStageIdLength: number;
  maxScopeSegments: number;
  valid: { name: string; scope: string[]; stage: string; stageId: string }[];
  invalid: { name: string; ref: unknown; code: string; message: string }[];
}
const vectors = JSON.parse(readFileSync(join(__dirname, '..', '..', 'vectors', 'stage-ids.json'), 'utf8')) as Vectors;

describe('C20: stage-id test vectors', () => {
  it.each(vectors.valid.map((v) => [v.name, v] as const))('valid: %s', (_name, v) => {
    expect(stageId({ scope: v.scope, stage: v.stage })).toBe(v.stageId);
    expect(parseStageId(v.stageId)).toEqual({ scope: v.scope, stage: v.stage });
  });

  it.each(vectors.invalid.map((v) => [v.name, v] as const))('invalid: %s', (_name, v) => {
    expect(() => stageId(v.ref as never)).toThrow(InvalidStageRefError);
    expect(() => stageId(v.ref as never)).toThrow(expect.objectContaining({ code: v.code, message: v.message }));
  });

  it('the vectors hold the limits, the characters URL encoders disagree on, NFC/NFD and astral characters', () => {
    expect(vectors).toMatchObject({ maxStageIdLength: MAX_STAGE_ID_LENGTH, maxScopeSegments: MAX_SCOPE_SEGMENTS });
    const ids = vectors.valid.map((v) => v.stageId);
    const inputs = vectors.valid.map((v) => [...v.scope, v.stage].join(''));
    for (const c of ['/', "'", '(', ')', '!', '*', '~', '@', ' ', '+', '%']) {
      expect({ c, covered: inputs.some((s) => s.includes(c)) }).toEqual({ c, covered: true });
    }
    // exactly at the limit is valid, one past is not (also counted on the encoded form)
    expect(ids.filter((id) => id.length === MAX_STAGE_ID_LENGTH)).toHaveLength(2);
    expect(vectors.invalid.filter((v) => v.message.endsWith(`got ${MAX_STAGE_ID_LENGTH + 1}`))).toHaveLength(2);
    // NFC and NFD forms of one text are two stage ids: stageId does not normalize
    const nfc = vectors.valid.find((v) => v.scope[0] === 'caf\u00e9')!;
    const nfd = vectors.valid.find((v) => v.scope[0] === 'cafe\u0301')!;
    expect(nfd.scope[0]!.normalize('NFC')).toBe(nfc.scope[0]);
    expect([nfc.stageId, nfd.stageId]).toEqual(['caf%C3%A9/x', 'cafe%CC%81/x']);
    expect(inputs.some((s) => /[\u{10000}-\u{10FFFF}]/u.test(s))).toBe(true);
  });
});
