import { promote } from '../../../src/bullmq/adapter';
import { harness, notSent, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** A stage deferred for 60 s whose marker was then deleted by hand; returns its wake-up id. */
async function markerDeleted(h: ReturnType<typeof harness>): Promise<string> {
  h.executor.script(image, notSent('no_worker_available'));
  await h.engine.dispatchStage(image, {});
  const [d] = await h.engine.listDeferred();
  expect(await h.redis.del(h.engine.deferredStageKey(image))).toBe(1);
  return d!.wakeUpJobId;
}

describe('C17: the marker deleted by hand (README FAQ)', () => {
  it('dispatchStage goes through at once, and its success removes the wake-up', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    const wakeUp = await markerDeleted(h);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(2);
    expect(await h.engine.queue.getJob(wakeUp)).toBeUndefined();
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });

  it("enqueue answers `pending` with the wake-up's job id until the wake-up runs, then adds", async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    const wakeUp = await markerDeleted(h);
    expect(await h.engine.isStageDeferred(image)).toBe(false);
    expect(await h.engine.enqueue(image, {})).toEqual({
      added: false,
      reason: 'pending',
      jobId: wakeUp,
      payloadTaken: false,
    });
    expect(await h.engine.queue.getJobCounts('wait', 'delayed')).toEqual({ wait: 0, delayed: 1 });
    // the wake-up runs (promoted here instead of waiting 60 s) and dispatches the stage
    h.executor.script(image, SENT);
    await promote(h.engine.queue, wakeUp);
    h.engine.createWorker();
    await waitFor(() => h.executor.calls.length === 2, 'the wake-up to dispatch');
    await waitFor(async () => (await h.engine.queue.getJobState(wakeUp)) === 'unknown', 'the wake-up to complete');
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });
});
