import { harness } from '../../helpers/engine';
import { deferOnce, watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';
import type { StageRef } from '../../../src';

const image: StageRef = { scope: ['removed', 'wake-up', 'producer'], stage: 'image' };

describe('C17: a wake-up removed by hand, then a job added by a producer that skips the enqueue probe', () => {
  it("C17: the job dispatches the stage (the removed wake-up's licence carries nothing), and the chain ends: nothing of the stage is kept or woken", async () => {
    const h = harness();
    const wakeUpId = await deferOnce(h, image);
    await (await h.engine.queue.getJob(wakeUpId))!.remove();
    // BullMQ's own add with the engine's job data (as a producer in another language sends it)
    const job = await addProducerJob(h.engine.queue, image);
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the producer job completed');
    expect({ id: done[0]!.id, result: done[0]!.result }).toMatchObject({ id: job.id, result: { dispatched: true } });
    expect(h.executor.callsFor(image)).toBe(2);
    // the chain ended with that success: nothing of the stage is kept, nor waits to be woken (once
    // the success's lazy release has landed: it rides the next batch)
    await waitFor(async () => (await keptFor(h, image)).length === 0, 'nothing of the stage kept', 3000).catch(
      async () => expect(await keptFor(h, image)).toEqual([]),
    );
    expect(await h.engine.wakeDeferred()).toEqual({ woken: [] });
  });
});
