import { harness, notSent } from '../../helpers/engine';
import type { StageRef } from '../../../src';

/**
 * a fix refuses a payload with a lone UTF-16 surrogate
 * (`checkPayload`'s LONE_SURROGATE): Redis' cjson cannot read the wake-up's data back, and the
 * views (listDeferred, the CLI's list/show) lose the deferral's reason. The call's `buildId` is
 * written into the same job data (`dispatchJobData(ref, payload, call.buildId, ...)`), but
 * `checkCall` only checks that it is a string: a build id cut mid-emoji (or any lone surrogate)
 * is accepted, and the deferral it records is listed with reason 'unknown'.
 */
const cut: StageRef = { scope: ['book-1'], stage: 'image' };

describe('C22: a buildId with a lone surrogate', () => {
  it('a buildId with a lone surrogate is INVALID_PAYLOAD before anything is written', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    const r = await h.engine.dispatchStage(cut, { caption: 'ok' }, { buildId: 'build 🎂'.slice(0, -1) }).then(
      () => 'accepted',
      (e: unknown) => (e as { code?: string }).code,
    );
    const listed = await h.engine.listDeferred();
    // either refused up front (as the payload is), or listed with its real reason
    expect({ r, reasons: listed.map((d) => d.reason) }).toEqual(
      r === 'accepted' ? { r, reasons: ['no_worker_available'] } : { r: 'INVALID_PAYLOAD', reasons: [] },
    );
  });
});
