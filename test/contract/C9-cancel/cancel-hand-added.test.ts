import { readyJobId } from '../../../src/job-data';
import { stageId } from '../../../src/stage-ref';
import { harness, SENT } from '../../helpers/engine';
import { heldExecutor, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
/** A job added by hand (its id is not the engine's), with the data a dispatch job carries. */
const handData = { v: 1, scope: image.scope, stage: image.stage, payload: { p: 1 } };

describe('C9: a cancel while a producer job (kept when it completes) is in flight', () => {
  it('marks that job, so a retry of it by hand after it completed does not dispatch the cancelled stage', async () => {
    const h = harness();
    const held = heldExecutor(SENT);
    h.executor.script(image, held.executor);
    const kept = await addProducerJob(h.engine.queue, image, { removeOnComplete: false }, { p: 1 });
    const { done } = watch(h.engine.createWorker());
    await held.running;
    expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
    held.release();
    await waitFor(() => done.length === 1, 'the job completed');
    expect(done[0]!.result).toMatchObject({ dispatched: true, cancelled: true });
    await (await h.engine.queue.getJob(kept.id!))!.retry('completed');
    await waitFor(() => done.length === 2, 'the job retried by hand completed');
    expect(done[1]!.result).toMatchObject({ dispatched: false });
    expect(h.executor.calls).toHaveLength(1);
  });
});

describe('C9: a cancel while the enqueued job is in flight', () => {
  it('frees the stage’s deduplication: a producer’s deduplicating add after it (BullMQ’s add, as the Python producer sends it) adds a new job, not absorbed by the cancelled one', async () => {
    const h = harness();
    const held = heldExecutor(SENT);
    h.executor.script(image, held.executor, SENT);
    try {
      const first = await h.engine.enqueue(image, { p: 1 });
      const { done } = watch(h.engine.createWorker());
      await held.running;
      expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ inFlight: true });
      const sid = stageId(image);
      const id = readyJobId(sid);
      await h.engine.queue.add(
        'image',
        { ...handData, payload: { p: 2 } },
        {
          jobId: id,
          deduplication: { id: sid },
          attempts: 3,
        },
      );
      expect(id).not.toBe(first.jobId);
      expect(await h.engine.queue.getJobState(id)).not.toBe('unknown');
      held.release();
      await waitFor(() => done.length === 2, 'both jobs completed');
      expect(h.executor.calls.map((c) => c.payload)).toEqual([{ p: 1 }, { p: 2 }]);
    } finally {
      held.release();
    }
  });

  it('leaves alone a job added by hand under its own id with the stage’s deduplication id (only the engine’s own jobs are removed)', async () => {
    const h = harness();
    await h.engine.queue.add('image', handData, {
      jobId: 'mine-1',
      delay: 60_000,
      deduplication: { id: stageId(image) },
    });
    expect(await h.engine.cancelActiveDispatch(image)).toMatchObject({ removedJobs: 0 });
    expect(await h.engine.queue.getJobState('mine-1')).toBe('delayed');
  });
});
