import { harness, notSent } from '../../helpers/engine';

const scene = ['book-1', 'ch-2', 'sc-7'];
const image = { scope: scene, stage: 'image' };
const video = { scope: scene, stage: 'video' };

describe('C23: events', () => {
  it('emits deferred then suppressed, and dispatched', async () => {
    const h = harness();
    const seen: string[] = [];
    for (const name of ['deferred', 'suppressed', 'dispatched', 'failed'] as const)
      h.engine.on(name, () => seen.push(name));
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(image, {});
    await h.engine.dispatchStage(video, {});
    h.executor.script(video, notSent('send_failed'));
    await h.engine.dispatchStage(video, {});
    expect(seen).toEqual(['deferred', 'suppressed', 'dispatched', 'failed']);
  });
});
