import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';

/**
 * A misspelt filter (`{ kind: 'image' }`, `{ stages: … }`, `{ scopes: […] }`) would be no filter at
 * all and wake the longest-waiting stage of ANY kind and scope: `wakeDeferred` refuses a key it does
 * not know, as the engine's options (`.strict()`) do.
 */
const video: StageRef = { scope: ['book-1'], stage: 'video' };

describe('C8: a misspelt wakeDeferred filter', () => {
  it.each([{ kind: 'image' }, { stages: 'image' }, { scopes: ['book-2'] }, { Stage: 'image' }])(
    'bad input: %p is INVALID_OPTIONS before anything is woken',
    async (filter) => {
      const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
      h.executor.fallback = notSent('no_worker_available');
      await h.engine.dispatchStage(video, {});
      const r = await h.engine.wakeDeferred(filter as never).then(
        (x) => x.woken,
        (e: { code?: string }) => e.code,
      );
      expect({ r, videoDeferred: await h.engine.isStageDeferred(video) }).toEqual({
        r: 'INVALID_OPTIONS',
        videoDeferred: true,
      });
    },
  );

  it('the refusal names every unknown key and the keys a filter takes', async () => {
    const h = harness();
    await expect(h.engine.wakeDeferred({ kind: 'image', stages: 'video' } as never)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining('"kind", "stages": expected { limit?, scope?, stage?, resource? }'),
    });
  });
});
