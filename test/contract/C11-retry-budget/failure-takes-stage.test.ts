import { harness, notSent } from '../../helpers/engine';
import { keysUnder } from '../../helpers/redis';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

describe('C11: a direct call that fails for real', () => {
  it('leaves no licence behind (only a job holds the stage while it waits out a retry); the next enqueue adds a job', async () => {
    const h = harness();
    h.executor.script(image, notSent('send_failed'));
    const r = await h.engine.dispatchStage(image, {});
    expect(r).toMatchObject({ dispatched: false, reason: 'send_failed' });
    // what is left under the prefix: the fencing counter and BullMQ's queue meta, nothing of the stage
    const left = (await keysUnder(h.redis, h.prefix)).map((k) => k.slice(`${h.prefix}:${h.queueName}:`.length));
    expect(left.sort()).toEqual(['meta', 'sd:fence']);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });
});
