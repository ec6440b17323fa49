import { harness } from '../../helpers/engine';
import { keysUnder } from '../../helpers/redis';
import { payloadThroughWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * Path: `checkPayload` (src/dispatch.ts:623-672) runs JSON.stringify once (only to see that
 * it does not throw; its text is not compared with anything) and then walks the payload with
 * `Object.entries`, which sees enumerable own properties only. A plain object (prototype
 * Object.prototype) with a NON-enumerable own property passes both: JSON.stringify honours a
 * non-enumerable `toJSON` (it looks the method up, enumerable or not) and silently drops a
 * non-enumerable data property. The executor of the direct call gets the object as it is;
 * the wake-up's executor gets what BullMQ stored, its JSON: another payload.
 *
 * Expected (README, "Errors": "Bad input (a ref, a payload that does not survive JSON as it
 * is ...) is rejected before anything is called or written"; src/dispatch.ts doc of
 * checkPayload: "a payload comes back the same from the job's JSON data, as the executor
 * sees it after a wake-up"): refused with INVALID_PAYLOAD, or the same payload after the
 * wake-up. What happens: accepted, and the wake-up's executor gets a different payload (the
 * toJSON's answer instead of the object; the hidden field gone).
 */
const image: StageRef = { scope: ['book-27', 'hidden'], stage: 'image' };

describe('C22: payloads with non-enumerable fields', () => {
  it("a payload with a non-enumerable toJSON is accepted, and after a deferral the executor gets the toJSON's answer instead of the payload", async () => {
    const payload = Object.defineProperty({ sceneUrl: 'https://farm/scene-7' }, 'toJSON', {
      value: () => ({ sceneUrl: 'https://elsewhere/other' }),
      enumerable: false,
    });
    const r = await payloadThroughWakeUp(image, payload);
    if ('refused' in r) {
      expect(r.refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
      return;
    }
    expect(r.woken).toStrictEqual(r.first);
  });

  it('a payload with a non-enumerable field is accepted, and after a deferral the executor gets it without that field', async () => {
    const payload = Object.defineProperty({ sceneUrl: 'https://farm/scene-7' }, 'priority', {
      value: 9,
      enumerable: false,
    });
    const r = await payloadThroughWakeUp(image, payload);
    if ('refused' in r) {
      expect(r.refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
      return;
    }
    const field = (p: unknown) => (p as { priority?: unknown }).priority;
    expect({ first: field(r.first), woken: field(r.woken) }).toEqual({ first: 9, woken: 9 });
  });

  // Same cause: the check calls a non-enumerable toJSON once, BullMQ's add calls it again. A
  // toJSON that fails the second time (a lazily-closed resource, a one-shot stream) reaches the
  // caller of enqueue as the app's own raw error from inside BullMQ, not as INVALID_PAYLOAD.
  it("enqueue of a payload whose non-enumerable toJSON throws the second time rejects with the raw error from BullMQ's add, not INVALID_PAYLOAD", async () => {
    const h = harness();
    let calls = 0;
    const payload = Object.defineProperty({ sceneUrl: 'https://farm/scene-7' }, 'toJSON', {
      value: () => {
        if (++calls > 1) throw new Error('stream already consumed');
        return { sceneUrl: 'https://farm/scene-7' };
      },
      enumerable: false,
    });
    const thrown = await h.engine.enqueue(image, payload).then(
      () => undefined,
      (e: unknown) => e,
    );
    // nothing of the stage was written
    const keys = (await keysUnder(h.redis, h.prefix)).filter((k) => !/:(meta|id|events)$/.test(k));
    expect({ thrown, keys }).toEqual({ thrown: expect.objectContaining({ code: 'INVALID_PAYLOAD' }), keys: [] });
  });
});
