import { harness, notSent } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
const crash = new Error('executor crashed');
const NO = notSent('no_worker_available');

describe('C11: a wake-up that fails for real keeps the chain it ran in', () => {
  it('its retry’s capacity deferral goes on with that chain (the deferrals before the failure count)', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 }, retry: { attempts: 3, backoff: fast } });
    h.executor.script(image, NO, crash, NO);
    const deferrals: number[] = [];
    h.engine.on('deferred', (e) => deferrals.push(e.deferrals));
    // the enqueued job defers (a chain of one capacity deferral)
    await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => deferrals.length === 1, 'deferred');
    // woken (not cleared: its chain goes on), the wake-up fails for real, and BullMQ's retry defers
    await h.engine.wakeDeferred({ stage: image.stage });
    await waitFor(() => deferrals.length === 2, 'the retry deferred');
    expect(failed).toHaveLength(1);
    // the retry's deferral is the chain's second capacity deferral in a row, as listDeferred shows it
    expect(deferrals).toEqual([1, 2]);
    expect(await listedDeferral(h.engine, image)).toMatchObject({ class: 'capacity', deferrals: 2 });
  });
});
