import { harness, notSent } from '../../helpers/engine';
import { keptFor, probe } from '../../helpers/visible';

/**
 * the enqueue probe (src/lua/enqueue-probe.lua) answers in one
 * call whether the job holding a stage's licence is pending: the engine's
 * enqueue makes no job-state lookup of its own before BullMQ's add.
 */
const image = { scope: ['book-1', 'ch-3'], stage: 'image' };

async function deferredThenMarkerDeleted() {
  const h = harness();
  h.executor.fallback = notSent('no_worker_available');
  const wakeUps: string[] = [];
  h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
  await h.engine.dispatchStage(image, {});
  expect(wakeUps).toHaveLength(1);
  // the marker gone (deleted by hand), the wake-up still scheduled and licensed
  await h.redis.del(h.engine.deferredStageKey(image));
  return { h, wakeUp: wakeUps[0]! };
}

describe('C19: the enqueue probe', () => {
  it('a stage whose licensed wake-up is pending answers `pending` with its job id, no job-state lookup', async () => {
    const { h, wakeUp } = await deferredThenMarkerDeleted();
    const lookups = jest.spyOn(h.engine.queue, 'getJobState');
    try {
      expect(await h.engine.enqueue(image, {})).toEqual({
        added: false,
        reason: 'pending',
        jobId: wakeUp,
        payloadTaken: false,
      });
      expect(lookups).not.toHaveBeenCalled();
    } finally {
      lookups.mockRestore();
    }
  });

  it('a licence whose job was removed by hand is dropped by the probe, and the enqueue adds a job', async () => {
    const { h, wakeUp } = await deferredThenMarkerDeleted();
    expect(await probe(h, image)).toEqual({ kind: 'pending', jobId: wakeUp });
    await h.engine.queue.remove(wakeUp);
    const r = await h.engine.enqueue(image, {});
    expect(r).toMatchObject({ added: true, reason: null, jobId: expect.stringMatching(/^book-1\/ch-3\/image@r\./) });
    // nothing of the removed wake-up is kept (the stage's chain goes on until the new job ends it)
    expect((await keptFor(h, image)).filter((k) => k.includes(wakeUp))).toEqual([]);
  });
});
