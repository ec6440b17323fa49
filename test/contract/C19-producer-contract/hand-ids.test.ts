import { readStage } from '../../../src/cli/read';
import { stageId } from '../../../src/stage-ref';
import { ioReader, QueueKeys } from '../../../src/store/reader';
import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptFor, probe } from '../../helpers/visible';

/**
 * a review (a hostile review of `ownJob`, docs/design.md "licences"): a member
 * `<stageId>@j.<id>` names a job added by hand; the scripts act on that job only
 * while its data names the stage. These are the paths where it does: the job is
 * the stage's own, and everything its member did before `ownJob` it still does.
 * (A first version of the check trusted a field written when the job took the
 * member; a member written without it, and a job re-added under the same id,
 * lost their effect: these tests caught that.)
 */
const A = { scope: ['book-r9', 'ch-1'], stage: 'image' };
const B = { scope: ['book-r9', 'ch-2'], stage: 'image' };
const dataOf = (ref: typeof A) => ({ v: 1, scope: ref.scope, stage: ref.stage, payload: {} });
const crash = new Error('executor crashed');

/** A hand-added job 'x-1' of stage A that failed once (holds A's licence) or, with attempts 1, for good (its record). */
async function handJobOfA(attempts: number, workerOpts = {}, jobOpts = {}) {
  const h = harness();
  h.executor.script(A, crash);
  await h.engine.queue.add('image', dataOf(A), {
    jobId: 'x-1',
    attempts,
    backoff: { type: 'fixed', delay: 60_000 },
    ...jobOpts,
  });
  const worker = h.engine.createWorker(workerOpts);
  const w = watch(worker);
  await waitFor(() => w.failed.length === 1, 'job x-1 of stage A failed');
  return { h, w };
}

describe('C19: a member naming a job added by hand that is the stage’s own', () => {
  it('a cancel of the stage still stops a retry by hand of its job that failed for good', async () => {
    const { h, w } = await handJobOfA(1);
    expect(await h.engine.queue.getJobState('x-1')).toBe('failed');
    await h.engine.cancelActiveDispatch(A);
    // scripts.ts (CANCEL): "mark every job of the stage the engine knows of (..., failed for good, ...)
    // cancelled, so none of them dispatches later, even if an operator retries it by hand"
    await (await h.engine.queue.getJob('x-1'))!.retry('failed');
    await waitFor(() => w.done.some((d) => d.id === 'x-1') || w.failed.length > 1, 'x-1 ran again');
    expect(h.executor.callsFor(A)).toBe(1);
  });

  it('an enqueue while its hand-added job waits out its backoff holding the licence answers pending', async () => {
    const { h } = await handJobOfA(3);
    expect(await h.engine.queue.getJobState('x-1')).toBe('delayed');
    expect(await probe(h, A)).toEqual({ kind: 'pending', jobId: 'x-1' });
    expect(await h.engine.enqueue(A, {})).toMatchObject({ added: false, reason: 'pending', jobId: 'x-1' });
  });

  it('an enqueue then, and the job’s retry: the stage is dispatched once', async () => {
    const { h, w } = await handJobOfA(3);
    h.executor.fallback = SENT;
    const r = await h.engine.enqueue(A, {});
    await (await h.engine.queue.getJob('x-1'))!.promote();
    await waitFor(
      () => w.done.some((d) => d.id === 'x-1') && (!r.added || w.done.some((d) => d.id === r.jobId)),
      'x-1 (and any enqueued job) ran',
    );
    const sent = h.executor.callsOf(A).filter((c) => c.result?.dispatched === true).length;
    expect(sent).toBe(1);
  });

  it('a success of the stage elsewhere supersedes the licensed job waiting out its backoff (it does not dispatch again)', async () => {
    const { h, w } = await handJobOfA(3);
    h.executor.script(A, SENT);
    expect(await h.engine.dispatchStage(A, {})).toMatchObject({ dispatched: true });
    h.executor.fallback = SENT;
    const job = await h.engine.queue.getJob('x-1');
    if (job) {
      await job.promote();
      await waitFor(() => w.done.some((d) => d.id === 'x-1') || w.failed.length > 1, 'x-1 ran again');
    }
    // the crash and the direct success: x-1's retry must not dispatch the stage a second time
    expect(h.executor.callsFor(A)).toBe(2);
  });
});

describe('C19: an operator re-adds the SAME stage’s job under the id (remove, then add: BullMQ refuses a live id)', () => {
  async function readded() {
    const t = await handJobOfA(1);
    await (await t.h.engine.queue.getJob('x-1'))!.remove();
    await t.h.engine.queue.add('image', dataOf(A), { jobId: 'x-1', attempts: 3, delay: 60_000 });
    return t;
  }

  it('enqueue of the stage answers pending with the re-added job, not a second job', async () => {
    const { h } = await readded();
    expect(await h.engine.enqueue(A, {})).toMatchObject({ added: false, reason: 'pending', jobId: 'x-1' });
  });

  it('a cancel of the stage reaches the re-added job named by its record', async () => {
    const { h, w } = await readded();
    await h.engine.cancelActiveDispatch(A);
    h.executor.fallback = SENT;
    // the cancel removes it (a pending job named by a record), or marks it: it must not dispatch
    const job = await h.engine.queue.getJob('x-1');
    if (job) {
      await job.promote();
      await waitFor(() => w.done.some((d) => d.id === 'x-1') || w.failed.length > 1, 'x-1 ran');
    }
    expect(h.executor.callsFor(A)).toBe(1);
  });
});

describe('C19: removeOnFail that removes the job as it fails leaves no record (docs/design.md)', () => {
  it.each([
    ['{ age: 0 }', { age: 0 }],
    ['{ age: -1 }', { age: -1 }],
  ])('job option %s: BullMQ removes the failed job, and FAIL records nothing', async (_, rof) => {
    const { h } = await handJobOfA(1, {}, { removeOnFail: rof });
    await waitFor(async () => (await h.engine.queue.getJob('x-1')) === undefined, 'BullMQ removed x-1');
    expect(await keptFor(h, A)).toEqual([]);
  });
});

describe('C19: the CLI reads a member whose job is not the stage’s own as the scripts do', () => {
  it('show of stage A after its licensed job’s id was reused for stage B does not say A is pending on B’s job', async () => {
    const { h } = await handJobOfA(3);
    await (await h.engine.queue.getJob('x-1'))!.remove();
    await h.engine.queue.add('image', dataOf(B), { jobId: 'x-1', attempts: 3, delay: 60_000 });
    // the engine still keeps A's hold by job x-1 (nothing has looked at it since)
    expect((await keptFor(h, A)).length).toBeGreaterThan(0);
    const state = await readStage(ioReader(h.redis), new QueueKeys(h.prefix, h.queueName), stageId(A));
    // the probe (enqueue) finds nothing pending for A: it would add a job
    expect(state).not.toMatchObject({ state: 'pending', jobId: 'x-1' });
  });
});
