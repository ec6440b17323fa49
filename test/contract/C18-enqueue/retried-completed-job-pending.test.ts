import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * With `removeOnComplete: false` a dispatched job stays in Bull Board's Completed tab, where an
 * operator may press Retry. The retried job waits for its stage like any other: `enqueue` must
 * see it (C18: no second job while one is waiting), or the stage is sent twice.
 */
describe('C18: a kept completed job retried by hand is a pending job of its stage', () => {
  it('C18: enqueue adds nothing while the retried job waits, and the stage is sent once more, not twice', async () => {
    const h = harness({ removeOnComplete: false });
    const first = await h.engine.enqueue(image, { n: 1 });
    expect(first.added).toBe(true);
    const worker = h.engine.createWorker({ concurrency: 1 });
    const { done } = watch(worker);
    await waitFor(() => done.length === 1 || null, 'the first dispatch');
    expect(h.executor.calls).toHaveLength(1);
    await worker.close();

    // Bull Board's Retry on the kept completed job: it waits again
    const kept = (await h.engine.queue.getJobs(['completed']))[0]!;
    await kept.retry('completed');
    expect(await h.engine.queue.getJobState(kept.id!)).toBe('waiting');

    // a scheduler tick: the stage has a job waiting
    const second = await h.engine.enqueue(image, { n: 2 });

    const again = watch(h.engine.createWorker({ concurrency: 1 }));
    await waitFor(() => again.done.length >= (second.added ? 2 : 1) || null, 'the waiting jobs ran');
    expect({ added: second.added, sends: h.executor.calls.length }).toEqual({ added: false, sends: 2 });
  });
});
