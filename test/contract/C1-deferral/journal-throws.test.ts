import { type StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * the contract on the paths operators, shutdowns and clocks take.
 * Each title names the item it pins.
 */
// the engines of each test are torn down by harness() itself
afterEach(() => {
  jest.restoreAllMocks();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C1: a journal that throws after the deferral was recorded', () => {
  it('the deferral stands, dispatchStage resolves with journalFailed, hookFailed is emitted', async () => {
    const h = harness({ journal: async () => Promise.reject(new Error('journal down')) });
    const hooks: string[] = [];
    h.engine.on('hookFailed', (e) => hooks.push(`${e.hook}:${(e.error as Error).message}`));
    h.executor.script(image, notSent('no_worker_available'));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ reason: 'no_worker_available', journalFailed: true });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
    expect(hooks).toEqual(['journal:journal down']);
  });

  it('in a worker, the job completes: no attempt spent', async () => {
    const h = harness({ journal: async () => Promise.reject(new Error('journal down')) });
    h.executor.script(image, notSent('no_worker_available'));
    await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'completed');
    expect(failed).toHaveLength(0);
    expect(done[0]!.result).toMatchObject({ journalFailed: true });
  });
});
