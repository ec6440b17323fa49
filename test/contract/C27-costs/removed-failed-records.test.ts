import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import { keptFor, probe } from '../../helpers/visible';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * C27: "failed jobs removed leave no record behind". A job that fails for good is recorded when
 * BullMQ keeps it (so a cancel reaches it); BullMQ may remove it later (its `removeOnFail` count or
 * age trims it, or Bull Board's Remove) without a word to the engine. The record goes the next
 * time the stage is looked at: here, the enqueue probe a producer runs.
 */
const a: StageRef = { scope: ['trim', 'records'], stage: 'a' };
const b: StageRef = { scope: ['trim', 'records'], stage: 'b' };
const dataOf = (r: StageRef) => ({ v: 1, scope: r.scope, stage: r.stage, payload: {} });

async function addProducerJob(h: ReturnType<typeof harness>, r: StageRef, removeOnFail: unknown) {
  const sid = stageId(r);
  return h.engine.queue.add(r.stage, dataOf(r), {
    jobId: readyJobId(sid),
    deduplication: { id: sid },
    attempts: 1,
    removeOnFail: removeOnFail as never,
  });
}

describe('C27: failed jobs removed later leave no record once the stage is looked at again', () => {
  it('C27: a failed job trimmed by BullMQ (removeOnFail: { count: 1 }) leaves nothing of its stage behind past the next enqueue probe', async () => {
    const h = harness();
    h.executor.fallback = { dispatched: false, jobs: 0, reason: 'send_failed' };
    const { failed } = watch(h.engine.createWorker());
    const first = await addProducerJob(h, a, { count: 1 });
    await waitFor(() => failed.length === 1, 'stage a failed for good');
    await addProducerJob(h, b, { count: 1 });
    await waitFor(() => failed.length === 2, 'stage b failed for good');
    // BullMQ kept one failed job: stage a's is gone
    await waitFor(async () => (await h.engine.queue.getJob(first.id!)) === undefined, "stage a's job trimmed");
    expect(await probe(h, a)).toEqual({ kind: 'none' });
    expect(await keptFor(h, a)).toEqual([]);
  }, 20_000);

  it('C27: a failed job removed in Bull Board (job.remove()) leaves nothing of its stage behind past the next enqueue probe', async () => {
    const h = harness();
    h.executor.fallback = { dispatched: false, jobs: 0, reason: 'send_failed' };
    const { failed } = watch(h.engine.createWorker());
    const job = await addProducerJob(h, a, undefined);
    await waitFor(() => failed.length === 1, 'stage a failed for good');
    await (await h.engine.queue.getJob(job.id!))!.remove();
    expect(await probe(h, a)).toEqual({ kind: 'none' });
    expect(await keptFor(h, a)).toEqual([]);
  }, 20_000);
});
