import { stageId } from '../../../src/stage-ref';
import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { internalRecordedStage, internalSetRecordedStage, probe } from '../../helpers/visible';

/**
 * Cost: `ownJob` (and the probe's `names`) decoded the whole data of every
 * `<stageId>@j.<id>` member of the stage on each probe, begin, release and cancel: a stage
 * with hand-added jobs of large payloads blocked Redis for tens of ms an enqueue. Now a job
 * that takes a member records its stage (`sdi`), and the check reads that field; the data is
 * decoded only for a member without it (written by an earlier version, or a job re-added by
 * hand), once. The recorded stage is an internal field with no user-visible effect of its own:
 * read and set through the `internal…` helpers of test/helpers/visible.ts. Shown without a clock: once `sdi` is recorded, the data is not read at all (it
 * is replaced here by data that cannot be decoded, and the job still counts as the stage's).
 */
const A = { scope: ['book-r10c', 'ch-1'], stage: 'image' };

/** Job `jobId` of stage A, added by hand with `attempts`, failed once: with attempts left it waits out its retry, holding the licence; with 1 it failed for good (its record stays). */
async function failedOnce(jobId = 'h-1', attempts = 3) {
  const h = harness();
  const base = `${h.prefix}:${h.queueName}:`;
  h.executor.script(A, new Error('crash'));
  await h.engine.queue.add(
    'image',
    { v: 1, scope: A.scope, stage: A.stage, payload: {} },
    { jobId, attempts, backoff: { type: 'fixed', delay: 60_000 } },
  );
  const w = watch(h.engine.createWorker());
  await waitFor(() => w.failed.length === 1, `${jobId} failed once`);
  return { h, base, w };
}

it('C19: cost: a member whose job recorded its stage is judged without decoding the job’s data', async () => {
  const { h, base } = await failedOnce();
  // the job, waiting out its retry, holds the stage
  expect(await probe(h, A)).toEqual({ kind: 'pending', jobId: 'h-1' });
  // (no user-visible effect tells a recorded stage from data decoded each time: undecodable data
  // counts as the stage's either way; the record is the internal field, kept until the rebuild)
  expect(await internalRecordedStage(h, 'h-1')).toBe(stageId(A));
  // data no decoder reads: only the recorded stage can say whose the job is
  await h.redis.hset(`${base}h-1`, 'data', '{not json');
  // the probe counts it pending, and a cancel reaches it
  expect(await h.engine.enqueue(A, {})).toMatchObject({ added: false, reason: 'pending', jobId: 'h-1' });
  expect(await h.engine.cancelActiveDispatch(A)).toMatchObject({ removedJobs: 1 });
});

describe('C19: what decides when the data cannot, and the record of a decoded verdict', () => {
  /** Job h-1 of stage A failed once and holds the licence; `sdi` and `data` then set as given. */
  async function holder(sdi: string | null, data: string) {
    const { h, base } = await failedOnce();
    await internalSetRecordedStage(h, 'h-1', sdi);
    await h.redis.hset(`${base}h-1`, 'data', data);
    return { h, base };
  }

  it('no recorded stage and data cjson cannot decode: the job counts as the stage’s (as before the check)', async () => {
    const { h } = await holder(null, '{not json');
    expect(await h.engine.enqueue(A, {})).toMatchObject({ added: false, reason: 'pending', jobId: 'h-1' });
    expect(await h.engine.cancelActiveDispatch(A)).toMatchObject({ removedJobs: 1 });
  });

  it('another stage recorded: the job is not the stage’s, whatever its data', async () => {
    const { h } = await holder('book-other/ch-9/image', '{not json');
    expect(await h.engine.cancelActiveDispatch(A)).toMatchObject({ removedJobs: 0 });
    expect(await h.engine.queue.getJobState('h-1')).toBe('delayed');
  });

  it('no recorded stage: the first script that reads the member decodes the data once and records the stage', async () => {
    const { h, w } = await failedOnce('h-2', 1);
    await internalSetRecordedStage(h, 'h-2', null);
    // a cancel reads the record: it decodes h-2's data, finds it the stage's, reaches it and records the stage
    await h.engine.cancelActiveDispatch(A);
    expect(await internalRecordedStage(h, 'h-2')).toBe(stageId(A));
    // the cancel reached the failed job: retried by hand (Bull Board's Retry), it sends nothing
    await (await h.engine.queue.getJob('h-2'))!.retry('failed');
    await waitFor(() => w.done.length === 1, 'the retried job ran');
    expect({ calls: h.executor.callsFor(A), result: w.done[0]!.result }).toMatchObject({
      calls: 1,
      result: { cancelled: true },
    });
  });
});
