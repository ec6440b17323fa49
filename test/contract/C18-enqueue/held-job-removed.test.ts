import type { StageRef } from '../../../src';
import { harness, SENT } from '../../helpers/engine';
import { queued, watch } from '../../helpers/members';
import { FREE, stageView } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C18: an enqueued job in its retry backoff, removed by hand (Bull Board: Remove)', () => {
  it('enqueue answers pending while the job waits out its backoff; once removed by hand it adds a job, and nothing holds the stage after', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } } });
    h.executor.script(image, new Error('down'), SENT);
    const { jobId } = await h.engine.enqueue(image, {});
    const { failed, done } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'in backoff, holding the stage');
    expect(await stageView(h.engine, image)).toEqual({ deferred: false, listed: undefined, jobs: [jobId] });
    expect(await h.engine.enqueue(image, {})).toEqual({ added: false, reason: 'pending', jobId, payloadTaken: false });
    await (await h.engine.queue.getJob(jobId!))!.remove(); // Bull Board: Remove
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
    await waitFor(() => done.length === 1, 'dispatched');
    await waitFor(async () => (await queued(h)) === 0, 'the queue idle');
    expect(await stageView(h.engine, image)).toEqual(FREE);
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
  });
});
