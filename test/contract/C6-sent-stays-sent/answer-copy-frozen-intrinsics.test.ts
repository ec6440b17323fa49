import { checkExecutorResult } from '../../../src/answer';

/**
 * Pure unit test of commit a51e08d's `readAnswer` (src/dispatch.ts): the copy now
 * ASSIGNS each field (`answer[key] = v`), defineProperty only for `__proto__`. In an app that
 * freezes Object.prototype against prototype pollution (`Object.freeze(Object.prototype)`, a
 * common hardening advice; `node --frozen-intrinsics` and SES' default override taming keep
 * these keys assignable, so they are not affected), assignment of a key that Object.prototype holds as a read-only data property (`constructor`,
 * `toString`, `valueOf`, `hasOwnProperty`, ...) throws in strict mode (the "override mistake");
 * readAnswer's catch swallows it for any key that is not one of the engine's fields, and the
 * field silently disappears from the copy: from `dispatchStage`'s `result` and the job's return
 * value. 1356aa9 (defineProperty for every key) kept it.
 *
 * The test makes only `Object.prototype.toString` / `constructor` read-only (as a frozen
 * Object.prototype has them), and restores them.
 */
describe('C6: the copy of an answer under a frozen Object.prototype', () => {
  it('with Object.prototype frozen, an answer field named `toString` or `constructor` is lost from the copy', () => {
    const answer = JSON.parse(
      '{"dispatched":true,"jobs":1,"reason":null,"toString":"ts","constructor":"c1"}',
    ) as object;
    const saved = ['toString', 'constructor'].map(
      (k) => [k, Object.getOwnPropertyDescriptor(Object.prototype, k)!] as const,
    );
    let raw: unknown;
    try {
      for (const [k, d] of saved) Object.defineProperty(Object.prototype, k, { ...d, writable: false });
      raw = checkExecutorResult(answer).raw;
    } finally {
      for (const [k, d] of saved) Object.defineProperty(Object.prototype, k, d);
    }
    expect(JSON.stringify(raw)).toBe(JSON.stringify(answer));
  });
});
