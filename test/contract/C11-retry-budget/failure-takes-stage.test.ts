import { harness, notSent } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { keysUnder, waitFor } from '../../helpers/redis';

/**
 * Behaviours of src/dispatch.ts that Stryker's mutants showed unguarded
 * (docs/testing.md, "Surviving mutants"): each test here fails with its mutant.
 */
const image = { scope: ['book-14', 'ch-3', 'sc-1'], stage: 'image' };

describe('C11: a job whose real failure takes the stage from another job waiting out its retry', () => {
  it('the job it took the stage from no longer waits to run', async () => {
    const h = harness();
    h.executor.script(image, new Error('down'), new Error('down again'));
    const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };
    const opts = { attempts: 3, backoff: { type: 'fixed' as const, delay: 60_000 } };
    await h.engine.queue.add('image', data, { ...opts, jobId: 'first' });
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'the first job failed once');
    await h.engine.queue.add('image', data, { ...opts, jobId: 'second' });
    await waitFor(() => failed.length === 2, 'the second job failed once');
    expect(await h.engine.queue.getJobState('second')).toBe('delayed');
    expect(['unknown', 'completed']).toContain(await h.engine.queue.getJobState('first'));
  });
});

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
