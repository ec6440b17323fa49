import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * Bull Board's Completed tab shows the engine's jobs when `removeOnComplete` keeps them, in
 * BullMQ's own shape; by default they are removed once they complete.
 */
describe('C15: completed history of the engine’s jobs (`removeOnComplete`)', () => {
  it.each([
    ['false: kept', false, 2],
    ['{ count: 1 }: the last one kept', { count: 1 }, 1],
    ['the default (true): none kept', undefined, 0],
  ])('%s', async (_title, removeOnComplete, kept) => {
    const h = harness({
      windows: { capacitySeconds: 600 },
      ...(removeOnComplete === undefined ? {} : { removeOnComplete }),
    });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    const done: string[] = [];
    const worker = h.engine.createWorker({ concurrency: 1 });
    worker.on('completed', (job) => void done.push(job.id!));
    // an enqueued job that defers, then its wake-up, woken now, that sends the stage
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    await waitFor(async () => (await h.engine.isStageDeferred(image)) || null, 'the deferral');
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
    await waitFor(() => done.length === 2 || null, 'both jobs completed');
    const completed = await h.engine.queue.getJobs(['completed']);
    expect(completed.map((j) => j.id)).toEqual(done.slice(2 - kept).reverse());
    expect(completed.map((j) => j.returnvalue?.reason ?? null)).toEqual(
      ['no_worker_available', null].slice(2 - kept).reverse(),
    );
  });
});
