import '../../helpers/engine';
import { payloadThroughWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * Path: `checkPayload` (src/dispatch.ts:649-718). a fix walks property DESCRIPTORS
 * (`Object.getOwnPropertyDescriptors`, src/dispatch.ts:697) instead of values, so a getter is
 * refused. But JSON.stringify (src/dispatch.ts:660) and the direct call's executor read a
 * payload through [[Get]], not through its descriptors. A Proxy answers the two differently:
 * its `getOwnPropertyDescriptor` (none here: the target's) shows the raw value, its `get` trap
 * another. A "typed view" over raw data that revives a timestamp as a Date on read, a common
 * Proxy, passes the walk (the descriptor holds a number), so a Date (which checkPayload's own
 * doc says "is refused") reaches the direct call's executor, while BullMQ's JSON stores the
 * Date's ISO string and the wake-up's executor gets a string. The same a review getter:
 * the payload is read again and differs.
 *
 * Expected (checkPayload's doc: "a payload comes back the same from the job's JSON data, as the
 * executor sees it after a wake-up ... a Date ... is refused"; README "Errors": a payload that
 * does not survive JSON as it is is rejected before anything is called or written): refused
 * with INVALID_PAYLOAD (e.g. util.types.isProxy), or the same payload after the wake-up.
 * What happens: accepted; the direct call's executor got a Date, the wake-up's a string.
 */
const image: StageRef = { scope: ['book-29', 'proxies'], stage: 'image' };

describe('C22: Proxy payloads', () => {
  it('a Proxy payload (its get trap answered a Date: the direct call got a Date, after a deferral the executor got a string) is INVALID_PAYLOAD', async () => {
    const raw = { sceneUrl: 'https://farm/scene-7', renderedAt: 1_764_676_800_000 };
    const payload = new Proxy(raw, {
      get: (t, k) => (k === 'renderedAt' ? new Date(t.renderedAt) : Reflect.get(t, k)),
    });
    const r = await payloadThroughWakeUp(image, payload);
    if ('refused' in r) {
      expect(r.refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
      return;
    }
    const first = (r.first as { renderedAt: unknown }).renderedAt;
    const woken = (r.woken as { renderedAt: unknown }).renderedAt;
    // (the same value, of the same kind, on both paths)
    expect(typeof woken).toBe(typeof first);
    expect(first instanceof Date).toBe(woken instanceof Date);
  });
});
