import { harness, notSent } from '../../helpers/engine';

const scene = ['book-1', 'ch-2', 'sc-7'];
const image = { scope: scene, stage: 'image' };

describe('C5: outcomes are results, not exceptions', () => {
  it.each(['no_jobs_sent', 'no_jobs_generated', 'send_failed', 'already_ready', 'circuit_open', 'brand_new'])(
    '%s is returned (not deferred, not thrown), rollback called once',
    async (reason) => {
      const h = harness();
      h.executor.script(image, notSent(reason, { retryable: false }));
      const r = await h.engine.dispatchStage(image, {});
      expect(r).toMatchObject({ dispatched: false, reason, retryable: false });
      expect(h.rollbacks).toEqual([{ ref: image, reason }]);
      expect(h.journal).toHaveLength(0);
      expect(await h.engine.isStageDeferred(image)).toBe(false);
      expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    },
  );

  it('rethrows what the executor threw and releases the stage', async () => {
    const h = harness();
    const boom = new Error('downstream exploded');
    h.executor.script(image, boom);
    await expect(h.engine.dispatchStage(image, {})).rejects.toBe(boom);
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
  });

  it('rejects an executor result of the wrong shape with a typed error', async () => {
    const h = harness();
    h.executor.script(image, { dispatched: 'yes' } as never);
    await expect(h.engine.dispatchStage(image, {})).rejects.toMatchObject({ code: 'INVALID_EXECUTOR_RESULT' });
  });

  it('passes buildId and force to the executor', async () => {
    const h = harness();
    await h.engine.dispatchStage(image, { x: 1 }, { buildId: 'b-9', force: true });
    expect(h.executor.calls[0]).toMatchObject({ payload: { x: 1 }, buildId: 'b-9', force: true });
  });
});
