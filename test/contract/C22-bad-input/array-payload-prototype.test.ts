import '../../helpers/engine';
import { payloadThroughWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * Path: `checkPayload` (src/dispatch.ts:678-686). A change made it count every own
 * key (Reflect.ownKeys), so a hidden field or a non-enumerable own `toJSON` is refused. But the
 * ARRAY branch (`if (Array.isArray(obj))`) never looks at the array's prototype: the prototype
 * check (`proto !== Object.prototype && proto !== null` -> "a class instance") runs only in the
 * object branch. JSON.stringify looks `toJSON` up through the prototype chain, so an array whose
 * prototype has one (an Array subclass with a `toJSON` method, a list type of a domain library)
 * is accepted, and BullMQ stores the toJSON's answer as the payload. An Array subclass without
 * one is a class instance too: the direct call's executor gets the instance (its methods), the
 * wake-up's executor a plain array.
 *
 * Expected (src/dispatch.ts doc of checkPayload: "a payload comes back the same from the job's
 * JSON data, as the executor sees it after a wake-up ... a class instance is refused"; README
 * "Errors": a payload that does not survive JSON as it is is rejected before anything is called
 * or written; a fix: "checkPayload now counts every own key (INVALID_PAYLOAD)"):
 * refused with INVALID_PAYLOAD, or the same payload after the wake-up. What happens: accepted,
 * and after a deferral the executor gets the toJSON's answer, another payload.
 */
const image: StageRef = { scope: ['book-28', 'arrays'], stage: 'image' };

class SceneList extends Array<string> {
  // a domain list type that serialises itself in a compact form
  toJSON() {
    return { scenes: this.length };
  }
}

describe('C22: array payloads with a prototype of their own', () => {
  it("a payload that is an Array subclass with toJSON is refused (INVALID_PAYLOAD): after a deferral the executor got the toJSON's answer instead of the list", async () => {
    const payload = SceneList.from(['https://farm/scene-7', 'https://farm/scene-8']);
    const r = await payloadThroughWakeUp(image, payload);
    if ('refused' in r) {
      expect(r.refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
      return;
    }
    // (compared as JSON-free plain data: the list's items)
    expect(r.woken).toEqual(['https://farm/scene-7', 'https://farm/scene-8']);
  });

  // A second hole of the same walk: an accessor. `Object.entries` and JSON.stringify both call an
  // enumerable getter, so `checkPayload` sees one value, BullMQ stores another (read once more
  // when the job is added), and the direct call's executor reads a third: the payload is not
  // plain data (README "Errors": "a payload is plain data"), yet it passes. A lazily computed
  // field (an ORM's, a memoised URL) differs between the direct call and the wake-up.
  it("a payload with an enumerable getter is refused (INVALID_PAYLOAD): after a deferral the executor got the getter's value of the moment the job was added", async () => {
    let reads = 0;
    const payload = {
      sceneUrl: 'https://farm/scene-7',
      get attempt() {
        return ++reads;
      },
    };
    const r = await payloadThroughWakeUp(image, payload);
    if ('refused' in r) {
      expect(r.refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
      return;
    }
    const field = (p: unknown) => (p as { attempt?: unknown }).attempt;
    expect(field(r.woken)).toBe(field(r.first));
  });
});
