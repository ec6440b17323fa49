import { readyJobId } from '../../../src/job-data';
import { stageId } from '../../../src/stage-ref';
import { harness, notSent, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { addProducerJob } from '../../helpers/producer-job';
import { waitFor } from '../../helpers/redis';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
/** The data a dispatch job of `image` carries. */
const handData = { v: 1, scope: image.scope, stage: image.stage, payload: { p: 1 } };
const crash = new Error('executor crashed');

/** Adds a producer's job and runs it once: it fails (the executor's first answer throws) and waits 60 s. */
async function failedOnce(h: ReturnType<typeof harness>, attempts: number) {
  const { id } = await addProducerJob(h.engine.queue, image, {
    attempts,
    backoff: { type: 'fixed', delay: 60_000 },
  });
  const worker = h.engine.createWorker();
  const { failed } = watch(worker);
  await waitFor(() => failed.length === 1, 'the first attempt failed');
  return { worker, id: id! };
}

describe('C19: a producer’s job holding the stage while it waits out its retry', () => {
  it('a direct call goes on with that job’s retry budget (its licence names the job)', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(image, crash, notSent('no_worker_available'));
    const { id } = await failedOnce(h, 7);
    expect(await h.engine.queue.getJobState(id)).toBe('delayed');
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    const r = await h.engine.dispatchStage(image, { p: 1 });
    expect(r).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
    expect(wakeUps).toHaveLength(1);
    const wakeUp = await h.engine.queue.getJob(wakeUps[0]!);
    // the wake-up carries the budget of the job whose chain it continues, not the engine's default
    expect(wakeUp?.opts.attempts).toBe(7);
  });

  it('enqueue answers pending with that job’s id (no second job for the stage)', async () => {
    const h = harness();
    h.executor.script(image, crash);
    const { worker, id } = await failedOnce(h, 3);
    await worker.close();
    expect(await h.engine.enqueue(image, { p: 1 })).toMatchObject({
      added: false,
      reason: 'pending',
      jobId: id,
    });
    expect(await h.engine.queue.getJobCounts('wait', 'delayed', 'active')).toEqual({ wait: 0, delayed: 1, active: 0 });
  });
});
const NO = notSent('no_worker_available');

describe('C19: a job added for the stage under its deduplication id while a wake-up held the stage (a producer that skipped the probe)', () => {
  it('is marked superseded when the wake-up dispatches the stage, and does not dispatch it again', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(image, NO, SENT);
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: false });
    // the probe would answer 'pending'; this producer adds the job anyway (its deduplication key is free)
    const late = await h.engine.queue.add('image', handData, {
      jobId: readyJobId(stageId(image)),
      deduplication: { id: stageId(image) },
      attempts: 3,
      delay: 120_000,
    });
    expect(await h.engine.queue.getJobState(late.id!)).toBe('delayed');
    const { done } = watch(h.engine.createWorker());
    await (await h.engine.queue.getJob(wakeUps[0]!))!.promote();
    await waitFor(() => done.length === 1, 'the wake-up dispatched the stage');
    await (await h.engine.queue.getJob(late.id!))!.promote();
    await waitFor(() => done.length === 2, 'the late job ran');
    expect(done[1]).toMatchObject({ id: late.id, result: { dispatched: false, reason: 'superseded' } });
    expect(h.executor.calls.filter((c) => c.result === SENT)).toHaveLength(1);
  });
});
