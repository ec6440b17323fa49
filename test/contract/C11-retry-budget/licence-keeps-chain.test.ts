import { harness, notSent } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
/** A job added by hand (its id is not the engine's), with the data a dispatch job carries. */
const handData = { v: 1, scope: image.scope, stage: image.stage, payload: { p: 1 } };
const crash = new Error('executor crashed');
const NO = notSent('no_worker_available');

describe('C11: a job (not a wake-up) that holds the licence after a real failure keeps the chain it ran in', () => {
  it('its retry’s capacity deferral goes on with that chain (the deferrals before the failure count)', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 }, retry: { attempts: 3, backoff: fast } });
    h.executor.script(image, NO, crash, NO);
    const deferrals: number[] = [];
    h.engine.on('deferred', (e) => deferrals.push(e.deferrals));
    // a deferral: its wake-up holds the licence (a chain of one capacity deferral)
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
    await h.redis.del(h.engine.deferredStageKey(image));
    // a job added by hand runs in that chain, fails (it takes the licence), and its retry defers
    await h.engine.queue.add('image', handData, { jobId: 'chain-1', attempts: 3, backoff: fast });
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => deferrals.length === 2, 'the retry deferred');
    expect(failed).toHaveLength(1);
    // the retry's deferral is the chain's second capacity deferral in a row, as listDeferred shows it
    expect(deferrals).toEqual([1, 2]);
    expect(await listedDeferral(h.engine, image)).toMatchObject({ class: 'capacity', deferrals: 2 });
  });
});
