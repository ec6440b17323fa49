import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { fetchBy, watch } from '../../helpers/jobs';
import { probe } from '../../helpers/visible';
import type { StageRef } from '../../../src';

/**
 * A job's last failure is recorded by the engine (`FAIL`: `sdf` = BullMQ's `atm`,
 * `sdt` = its stalled count, and a `<member>?` record) before BullMQ fails the job. When the
 * worker dies in between, BullMQ's stalled check redelivers the job; its begin reads it as a
 * redelivery (its stalled count grew past `sdt`) and runs it on its old chain, as it should, but
 * it leaves `sdf`, `sdt`, `sdp` and the record on the job. If that redelivered run then fails with
 * retries left, BullMQ retries the job itself: `atm` grows past the stale `sdf`, and the next
 * begin takes BullMQ's own retry for a retry by hand (src/lua/scripts.ts, begin: `retried =
 * (sdf and sdf ~= atm) or ...`): a fresh chain and budget, and a superseded mark (`sds`) overruled.
 *
 * Contract: README, operator table: "A job whose worker died after the engine recorded its
 * finish, before BullMQ finished it, is no retry: its redelivery runs once more on its old budget
 * (and sends nothing when the stage went out meanwhile)"; docs/design.md, licence: "When another
 * attempt revokes a licence (a deferral, a success, a newer holder), its job is marked
 * superseded"; Keys table, `sdf`: "a later run with another `atm` is a retry by hand" means
 * BullMQ counted a finish the engine marked, which it never did here; "The retry budget
 * (`retry.attempts`) counts real failures across the stage's deferrals ... A success, a cancel, a
 * clear or a retry by hand starts a fresh one".
 *
 * The dying worker is BullMQ's manual processing (`getNextJob` + `engine.processor`), which never
 * moves the job, as a killed process would not; the stalled check is BullMQ's own
 * (`moveStalledJobsToWait`).
 */
const image = (book: string): StageRef => ({ scope: [book, 'ch-1', 'sc-1'], stage: 'image' });

/** A job of `ref` enqueued; its first run fails for good (unrecoverable), recorded, and its worker dies; the stalled check hands it on. */
async function redeliveredAfterFail(h: ReturnType<typeof harness>, ref: StageRef) {
  const base = `${h.prefix}:${h.queueName}:`;
  const redis = client();
  const { jobId } = await h.engine.enqueue(ref, {});
  const run1 = await fetchBy(h, 'tok-1');
  await expect(h.engine.processor(run1, 'tok-1')).rejects.toThrow('refused for good');
  // the engine recorded the failure; BullMQ has not failed the job (its worker died): the job
  // is still active, and it holds the stage
  expect(await h.engine.queue.getJobState(jobId!)).toBe('active');
  expect(await probe(h, ref)).toEqual({ kind: 'pending', jobId });
  // BullMQ's stalled check (another worker's) hands it on: its lock is gone
  await redis.del(`${base}${jobId}:lock`);
  const checker = new Worker(h.queueName, null, {
    connection: client({ maxRetriesPerRequest: null }),
    prefix: h.prefix,
    autorun: false,
    stalledInterval: 50,
  });
  try {
    await waitFor(
      async () => {
        await (checker as unknown as { moveStalledJobsToWait(): Promise<void> }).moveStalledJobsToWait();
        return Number(await redis.hget(`${base}${jobId}`, 'stc')) > 0;
      },
      'the stalled check handed the job on',
      10_000,
    );
  } finally {
    await checker.close();
  }
  return { jobId: jobId! };
}

describe('C14: a job redelivered after its failed-for-good mark, then retried by BullMQ', () => {
  it("a job redelivered after a crash between FAIL and BullMQ's failure, then failing with retries left, is superseded by a success sent meanwhile (it sent the stage a second time: BullMQ's own retry was taken for a retry by hand)", async () => {
    const a = image('r33-twice');
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(a, new UnrecoverableError('refused for good'), new Error('downstream 503'), SENT, SENT);
    const { jobId } = await redeliveredAfterFail(h, a);

    // the redelivery runs on its old chain and fails, retries left: it takes the stage's licence
    // (release 'h'); BullMQ is a moment from retrying it (its worker's moveToFailed)
    const run2: Job = await fetchBy(h, 'tok-2');
    const err = (await h.engine.processor(run2, 'tok-2').then(
      () => undefined,
      (e: Error) => e,
    )) as Error;
    expect(err.message).toBe('downstream 503');
    expect(await probe(h, a)).toEqual({ kind: 'pending', jobId });
    // in that moment a host dispatches the stage directly: sent; the job's hold on the stage is
    // taken from it (it cannot be removed, still active under its worker's lock)
    expect(await h.engine.dispatchStage(a, {})).toMatchObject({ dispatched: true });
    // BullMQ retries the job (its own count: 1 of 3)
    await run2.moveToFailed(err, 'tok-2', false);
    expect((await h.engine.queue.getJob(jobId))?.attemptsMade).toBe(1);

    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.length === 1, "the job's retry ran", 15_000);
    const sends = h.executor.callsOf(a).filter((c) => c.result?.dispatched).length;
    expect({ sends, retry: done[0]!.result }).toMatchObject({
      sends: 1,
      retry: { dispatched: false, reason: 'superseded' },
    });
  }, 30_000);

  it("a job redelivered after a crash between FAIL and BullMQ's failure keeps its retry budget when BullMQ retries it (it got a fresh one: 4 calls after the crash for a budget of 3)", async () => {
    const a = image('r33-budget');
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(
      a,
      new UnrecoverableError('refused for good'),
      ...Array.from({ length: 8 }, (_, i) => new Error(`downstream 503 #${i + 1}`)),
    );
    const { jobId } = await redeliveredAfterFail(h, a);

    // BullMQ's own behaviour on such a crash: the job runs again on its own count (atm 0 of 3),
    // so 3 more calls, then it fails for good
    const worker = h.engine.createWorker();
    const finals: string[] = [];
    worker.on('failed', (job) => void (job?.finishedOn && finals.push(job.id!)));
    await waitFor(() => finals.includes(jobId), 'the redelivered job failed for good', 20_000);
    expect({ calls: h.executor.callsFor(a), state: await h.engine.queue.getJobState(jobId) }).toEqual({
      calls: 4,
      state: 'failed',
    });
  }, 30_000);
});
