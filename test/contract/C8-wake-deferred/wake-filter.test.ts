import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';

/**
 * `wakeDeferred`'s filter is destructured without a check of its keys
 * (src/engine.ts `wakeDeferred`): a misspelt filter (`{ kind: 'image' }`, `{ stages: … }`,
 * `{ scopes: […] }`) is no filter at all and wakes the longest-waiting stage of ANY kind
 * and scope. The engine's options are `.strict()` (zod) for the same reason.
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
});
