import { harness, notSent } from '../../helpers/engine';
import type { StageRef } from '../../../src';

/**
 * `checkPayload` accepts a string with a lone surrogate (JSON.stringify
 * writes it as `\ud83d`, and JSON.parse reads it back: it "survives JSON as it
 * is"), e.g. a caption cut in the middle of an emoji by `.slice()`. Redis'
 * cjson refuses that escape ("invalid unicode escape code"), and the views read
 * the wake-up's reason and deferrals with cjson in Redis (src/store/reader.ts
 * FIELDS): `listDeferred` (and the CLI's `list` and `show`) report the
 * stage's reason as 'unknown'. The wake-up itself runs and dispatches (the
 * Worker parses the data in Node). Fixed: such a payload is refused.
 */
const cut: StageRef = { scope: ['book-1'], stage: 'image' };
const fine: StageRef = { scope: ['book-2'], stage: 'image' };

describe('C22: a payload with a lone surrogate', () => {
  it('a payload with a lone surrogate is INVALID_PAYLOAD before anything is called or written; the views read the rest', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    const refused = await h.engine.dispatchStage(cut, { caption: 'a cake 🎂'.slice(0, -1) }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
    expect((refused as Error).message).toContain('a lone UTF-16 surrogate');
    await expect(h.engine.enqueue(cut, { ['key \udc00']: 1 })).rejects.toMatchObject({ code: 'INVALID_PAYLOAD' });
    // a whole emoji, and the text of an escape (a backslash, then "ud83c"), are fine
    await h.engine.dispatchStage(fine, { caption: 'a cake 🎂 \\ud83c' });
    expect(h.executor.calls).toHaveLength(1);
    const listed = await h.engine.listDeferred();
    expect(listed.map((d) => [d.ref.scope[0], d.reason])).toEqual([['book-2', 'no_worker_available']]);
  });
});
