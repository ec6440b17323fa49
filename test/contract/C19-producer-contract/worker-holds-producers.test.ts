import type { Worker } from 'bullmq';
import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * a job that breaks the producer contract (docs/producers.md,
 * "Job options") fails with a typed error that says what is wrong; it is
 * never dispatched, nor completed as `cancelled` without a word.
 */
const ref = { scope: ['book-1', "it's (1)"], stage: 'image' };
const sid = "book-1/it's%20(1)/image"; // stageId(ref)
const data = { v: 1, scope: ref.scope, stage: ref.stage, payload: { n: 1 } };
const good = { attempts: 3, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true };

function failures(worker: Worker) {
  const { done, failed } = watch(worker);
  const out = () =>
    failed.map((f) => ({
      id: f.id,
      code: (f.error as Error & { code?: string }).code,
      final: f.error.name === 'UnrecoverableError',
      message: f.error.message,
    }));
  return { done, out };
}

/** Adds one job, runs a worker until it fails, and returns its one failure; nothing was dispatched. */
async function theFailure(jobData: unknown, opts: Record<string, unknown>) {
  const h = harness();
  await h.engine.queue.add(ref.stage, jobData, { ...good, ...opts } as never);
  const { done, out } = failures(h.engine.createWorker());
  await waitFor(() => out().length === 1, 'the job to fail');
  expect(done).toEqual([]);
  expect(h.executor.calls).toEqual([]);
  return out()[0];
}

describe('C19: the worker holds a producer to the contract', () => {
  it('an id whose stage id another encoder made (Python quote) fails with INVALID_JOB_OPTIONS, nothing dispatched', async () => {
    const pythonQuoted = 'book-1/it%27s%20%281%29/image'; // urllib.parse.quote with its defaults
    const id = `${pythonQuoted}@r.mj3k2x1a7f2b`;
    expect(await theFailure(data, { jobId: id, deduplication: { id: pythonQuoted } })).toEqual({
      id,
      code: 'INVALID_JOB_OPTIONS',
      final: true,
      message:
        `Dispatch job ${id} names stage id "${pythonQuoted}", but its data's scope and stage encode to "${sid}": ` +
        `the producer's stage-id encoding differs from this library's (docs/producers.md, "Job options")`,
    });
  });

  it.each([
    ['no deduplication id', {}, 'must be added with deduplication id "%s" (its stage id), got undefined'],
    [
      'another deduplication id',
      { deduplication: { id: 'x' } },
      'must be added with deduplication id "%s" (its stage id), got "x"',
    ],
    [
      'attempts 0 (none given)',
      { deduplication: { id: sid }, attempts: 0 },
      'must have `attempts` a positive integer, got 0 (BullMQ stores 0 when a job is added without attempts: give the budget, e.g. 3)',
    ],
    ['attempts 1.5', { deduplication: { id: sid }, attempts: 1.5 }, 'must have `attempts` a positive integer, got 1.5'],
    [
      'a fixed backoff without its delay',
      { deduplication: { id: sid }, attempts: 3, backoff: { type: 'fixed' } },
      "must have `backoff` { type: 'fixed' | 'exponential', delay: ms } or { type: '<your strategy's name>' }, got {\"type\":\"fixed\"}",
    ],
  ])('an enqueue id `<stageId>@r.…` with %s fails with INVALID_JOB_OPTIONS', async (_what, opts, said) => {
    const id = `${sid}@r.mj3k2x1a7f2b`;
    expect(await theFailure(data, { ...opts, jobId: id })).toEqual({
      id,
      code: 'INVALID_JOB_OPTIONS',
      final: true,
      message: `Dispatch job ${id} ${said.replace('%s', sid)} (docs/producers.md, "Job options")`,
    });
  });

  it('a job of an unknown wire format version fails with INVALID_JOB_DATA saying so, nothing dispatched', async () => {
    const id = `${sid}@r.mj3k2x1a7f2c`;
    expect(await theFailure({ ...data, v: 2 }, { jobId: id, deduplication: { id: sid } })).toEqual({
      id,
      code: 'INVALID_JOB_DATA',
      final: true,
      message: expect.stringMatching(/^Dispatch job .* is in wire format v2; this worker reads v1 only\. Upgrade/),
    });
  });

  it('a job that keeps the contract (as a foreign producer adds it) is dispatched', async () => {
    const h = harness();
    const id = `${sid}@r.mj3k2x1a7f2d`;
    await h.engine.queue.add(ref.stage, data, { ...good, jobId: id, deduplication: { id: sid } });
    const { done, out } = failures(h.engine.createWorker());
    await waitFor(() => done.length === 1, 'the job to complete');
    expect(out()).toEqual([]);
    expect(done[0]).toMatchObject({ id, result: { dispatched: true } });
    expect(h.executor.calls.map((c) => [c.ref, c.payload])).toEqual([[ref, { n: 1 }]]);
  });
});
