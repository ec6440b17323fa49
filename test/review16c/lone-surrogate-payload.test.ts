import { harness, notSent } from '../helpers/engine';
import type { StageRef } from '../../src';

/**
 * Review 16c. `checkPayload` accepts a string with a lone surrogate (JSON.stringify
 * writes it as `\ud83d`, and JSON.parse reads it back: it "survives JSON as it
 * is"), e.g. a caption cut in the middle of an emoji by `.slice()`. Redis'
 * cjson refuses that escape ("invalid unicode escape code"), and the views read
 * the wake-up's reason and deferrals with cjson in Redis (src/store/reader.ts
 * FIELDS): `listDeferred` (and the CLI's `list` and `show`) report the
 * stage's reason as 'unknown'. The wake-up itself runs and dispatches (the
 * Worker parses the data in Node).
 */
const cut: StageRef = { scope: ['book-1'], stage: 'image' };
const fine: StageRef = { scope: ['book-2'], stage: 'image' };

describe('review 16c: a payload with a lone surrogate', () => {
  it("DEFECT (wrong result): listDeferred reports the deferral's reason, not 'unknown'", async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(cut, { caption: 'a cake 🎂'.slice(0, -1) }); // '\ud83c' left
    await h.engine.dispatchStage(fine, { caption: 'a cake' });
    const listed = await h.engine.listDeferred();
    expect(listed.map((d) => [d.ref.scope[0], d.reason])).toEqual([
      ['book-1', 'no_worker_available'],
      ['book-2', 'no_worker_available'],
    ]);
  });
});
