import { harness, notSent, SENT, type Harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptFor, probe } from '../../helpers/visible';

/**
 * A licence or a failed-job record of a job added by hand names the job by its id
 * (`<stageId>@j.<job id>`). An operator may remove that job (Bull Board's "remove") and
 * add another stage's job under the same id: the member then names a job that is not the
 * stage's. Whatever ends the first stage's chain must leave that job alone, and an enqueue
 * of the first stage must not take it for its pending job.
 */
const A = { scope: ['book-r', 'ch-1'], stage: 'image' };
const B = { scope: ['book-r', 'ch-2'], stage: 'image' };
const dataOf = (ref: typeof A) => ({ v: 1, scope: ref.scope, stage: ref.stage, payload: {} });
const crash = new Error('executor crashed');
/** What the engine keeps of stage A that names job id x-1 (now B's job's). */
const keptOfX1 = async (h: Harness) => (await keptFor(h, A)).filter((k) => k.includes('x-1'));

/**
 * Adds job `jobId` of `ref` by hand (a 60 s backoff) on `h`, whose executor
 * crashes for `ref`, and runs the engine's worker until the job failed once:
 * the worker's completed and failed jobs.
 */
async function handJobFailedOnce(h: Harness, ref: typeof A, jobId: string, what: string, attempts = 3) {
  h.executor.script(ref, crash);
  await h.engine.queue.add('image', dataOf(ref), {
    jobId,
    attempts,
    backoff: { type: 'fixed', delay: 60_000 },
  });
  const jobs = watch(h.engine.createWorker());
  await waitFor(() => jobs.failed.length === 1, what);
  return jobs;
}

/**
 * Job 'x-1' of stage A failed once and waits out its retry, holding A's licence (or, with `attempts` 1,
 * failed for good: its record); then it is removed and 'x-1' reused for stage B (delayed).
 */
async function reusedUnderLicence(attempts = 3) {
  const h = harness();
  const w = await handJobFailedOnce(h, A, 'x-1', 'job x-1 of stage A failed once', attempts);
  // waiting out its retry it holds stage A; failed for good, it is kept on record for A
  if (attempts > 1) expect(await probe(h, A)).toEqual({ kind: 'pending', jobId: 'x-1' });
  else expect(await h.engine.queue.getJobState('x-1')).toBe('failed');
  await (await h.engine.queue.getJob('x-1'))!.remove();
  await h.engine.queue.add('image', dataOf(B), { jobId: 'x-1', attempts: 3, delay: 60_000 });
  /** Job x-1 (now stage B's) runs now: it must dispatch stage B. */
  const runB = async () => {
    expect(await h.engine.queue.getJobState('x-1')).toBe('delayed');
    h.executor.script(B, SENT);
    await (await h.engine.queue.getJob('x-1'))!.promote();
    await waitFor(() => w.done.some((d) => d.id === 'x-1'), 'job x-1 of stage B ran');
    expect(w.done.find((d) => d.id === 'x-1')!.result).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(B)).toBe(1);
  };
  return { h, runB };
}

describe('C19: a licence naming a job by an id an operator reused for another stage’s job', () => {
  it.each([
    ['a success of the first stage', 'success'],
    ['a capacity deferral of the first stage', 'deferral'],
    ['a cancel of the first stage', 'cancel'],
  ] as const)('%s leaves the other stage’s job in place and unmarked: it dispatches its own stage', async (_, how) => {
    const { h, runB } = await reusedUnderLicence();
    if (how === 'cancel') expect(await h.engine.cancelActiveDispatch(A)).toMatchObject({ removedJobs: 0 });
    else {
      h.executor.script(A, how === 'success' ? SENT : notSent('no_worker_available'));
      expect(await h.engine.dispatchStage(A, {})).toMatchObject({ dispatched: how === 'success' });
      expect(h.executor.callsFor(A)).toBe(2);
    }
    // A's hold by x-1 is gone (its chain ended or went on elsewhere), the job under its id untouched
    expect(await keptOfX1(h)).toEqual([]);
    await runB();
  });

  it('an enqueue of the first stage does not take the other stage’s job for its pending one: it adds a job', async () => {
    const { h, runB } = await reusedUnderLicence();
    const r = await h.engine.enqueue(A, {});
    expect(r).toMatchObject({ added: true });
    expect(r.jobId).not.toBe('x-1');
    expect(await keptOfX1(h)).toEqual([]);
    await runB();
  });

  it.each(['cancel', 'enqueue'] as const)(
    'a failed-job record of the first stage naming that id: a %s of the first stage leaves the other stage’s job alone',
    async (how) => {
      const { h, runB } = await reusedUnderLicence(1);
      if (how === 'cancel') expect(await h.engine.cancelActiveDispatch(A)).toMatchObject({ removedJobs: 0 });
      else expect(await h.engine.enqueue(A, {})).toMatchObject({ added: true });
      await runB();
    },
  );

  it('a deferral of the first stage carries neither that job’s failures nor its retry budget', async () => {
    const { h, runB } = await reusedUnderLicence();
    // B's job, with its own budget of 9, counts two failures of its own (BullMQ's atm)
    const key = `${h.prefix}:${h.queueName}:x-1`;
    await h.redis.hset(key, 'atm', 2, 'opts', JSON.stringify({ attempts: 9, delay: 60_000 }));
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    h.executor.script(A, notSent('no_worker_available'));
    expect(await h.engine.dispatchStage(A, {})).toMatchObject({ dispatched: false });
    // its wake-up, as Bull Board shows its id: the first capacity deferral of a chain with no failures
    expect(wakeUps[0]).toMatch(/@cap\.1\.0\.0\./);
    expect((await h.engine.listDeferred())[0]).toMatchObject({ ref: A, deferrals: 1 });
    expect((await h.engine.queue.getJob(wakeUps[0]!))!.opts.attempts).toBe(3);
    await h.redis.hset(key, 'atm', 0);
    await runB();
  });
});

describe('C19: a job added by hand is the stage’s own when its data names the stage, whatever its segments hold', () => {
  it.each([
    ['percent-encoded segments', { scope: ['bö ök/1', '50%', 'a@b'], stage: 'im age' }],
    ['a segment that looks encoded', { scope: ['%41', 'ch'], stage: 'x%2Fy' }],
  ])('%s: its licence still speaks for it (enqueue answers pending with it, a cancel removes it)', async (_, ref) => {
    const h = harness();
    await handJobFailedOnce(h, ref, 'x-9', 'job x-9 failed once');
    expect(await h.engine.enqueue(ref, {})).toMatchObject({ added: false, reason: 'pending', jobId: 'x-9' });
    // the same scope with another stage kind is another stage: its data does not name this one
    const other = { scope: ref.scope, stage: 'other' };
    expect(await h.engine.enqueue(other, {})).toMatchObject({ added: true });
    // the scripts' twin of the probe's rule (CANCEL's ownJob) finds it the stage's own as well
    expect(await h.engine.cancelActiveDispatch(ref)).toMatchObject({ removedJobs: 1 });
    expect(await h.engine.queue.getJob('x-9')).toBeUndefined();
  });
});

describe('C19: a job under a reused id whose data does not name the stage', () => {
  it.each([
    ['another stage kind in the same scope', { v: 1, scope: ['book-r', 'ch-1'], stage: 'video', payload: {} }],
    ['a scope one segment longer', { v: 1, scope: ['book-r', 'ch-1', 'image'], stage: 'image', payload: {} }],
    ['a scope one segment shorter', { v: 1, scope: ['book-r'], stage: 'image', payload: {} }],
    ['a job that is no dispatch job at all (no scope)', { foo: 1 }],
    ['a job whose data is not an object', 'plain text'],
  ])('%s: is not the stage’s: a cancel of the stage leaves it in place', async (_, data) => {
    const h = harness();
    const w = await handJobFailedOnce(h, A, 'x-1', 'job x-1 of stage A failed once');
    await (await h.engine.queue.getJob('x-1'))!.remove();
    await h.engine.queue.add('image', data, { jobId: 'x-1', attempts: 1, delay: 60_000 });
    expect(await h.engine.cancelActiveDispatch(A)).toMatchObject({ removedJobs: 0 });
    expect(await h.engine.queue.getJobState('x-1')).toBe('delayed');
    // the cancel did not reach it: run now, it is not ended as cancelled (it dispatches its own
    // stage, or fails as no dispatch job)
    await (await h.engine.queue.getJob('x-1'))!.promote();
    await waitFor(() => w.done.some((d) => d.id === 'x-1') || w.failed.length > 1, 'job x-1 ran');
    expect(w.done.find((d) => d.id === 'x-1')?.result ?? {}).not.toMatchObject({ cancelled: true });
  });
});
