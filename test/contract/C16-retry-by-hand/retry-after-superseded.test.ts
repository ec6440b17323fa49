import { harness, SENT } from '../../helpers/engine';
import { failureBesideSuccess } from '../../helpers/race';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import { released } from '../../helpers/visible';
import type { StageRef } from '../../../src';

/**
 * Path: the chain-end rule, `supersedeRecords` (src/lua/scripts.ts:437-457), run by a success's
 * release (mode '1', and a fix the lazy mode 'z', scripts.ts:466-469). For a
 * failed-job record whose job has no `finishedOn` it now does, besides 'sds', `HDEL sdf sdt sdp`
 * (scripts.ts:451-452). A job whose last failure the engine has
 * recorded but that BullMQ has not moved to failed yet (its worker alive, a few ms from
 * moveToFailed) is such a job. After BullMQ fails it, `begin` tells a retry by hand only from
 * 'sdf' or its '?' record (scripts.ts:336-339: `retried = (sdf and sdf ~= atm) or ((sdf or
 * failedMe) and not redelivered)`), both dropped now: the retried job has 'sds' and ends
 * `superseded` (scripts.ts:342). Only a Worker listener (`createWorker`, or `attachWorker` on a
 * Worker of one's own, engine.ts:297) writes the record again after BullMQ's failure; a Worker of
 * one's own that runs `engine.processor` without attachWorker (or a listener whose markFailed
 * hit a Redis blip: `.catch(() => undefined)`) never does. Before, the
 * same run kept 'sdf' (only 'sds' was set) and the retry ran: this test passes at a3ea110.
 * With `attachWorker(manual)` plus the 'failed' event the Worker would emit, it passes too.
 *
 * Expected (README operator table: "retries a failed job (Bull Board's Retry,
 * job.retry('failed')) -> the stage is dispatched with a fresh chain and a fresh retry budget,
 * unless it is deferred, in flight, or ... cancelled"; scripts.ts:448-449: "One BullMQ failed
 * (finishedOn) comes back only by a retry by hand after this, which runs it"): the operator's
 * retry, made after BullMQ failed the job and after the other job's success, dispatches.
 * What happens: it completes as superseded; nothing is sent.
 *
 * Set-up of lazy-release-skips-records (x's last failure recorded while y's lazily
 * released attempt runs); y's lazy release lands while x is still active, then x's (live) worker
 * fails it, then the operator retries x.
 */
const image: StageRef = { scope: ['book-29', 'ch-1', 'sc-2'], stage: 'image' };

describe('C16: a retry by hand of a job failed while another job sent the stage', () => {
  it("on a Worker of one's own, an operator's retry of a job that failed for good while another job sent the stage dispatches (it completed as superseded", async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 503'), SENT, SENT);
    const { manual, x, y, xError, sent } = await failureBesideSuccess(h, image, 'r29b-', 5000);
    try {
      expect(xError).toBeInstanceOf(Error);
      expect(sent).toMatchObject({ dispatched: true });
      // y completes; its lazy release lands (the stage lock is gone) while x is still active
      await y.moveToCompleted(sent, 'tok-y', false);
      await released(h, image);
      // x's live worker fails it (its last failure: BullMQ's moveToFailed, a few ms later)
      await x.moveToFailed(xError, 'tok-x', false);
      // the operator sees x failed, and retries it (Bull Board's Retry)
      await (await h.engine.queue.getJob('r29b-x'))!.retry('failed');

      const { done } = watch(h.engine.createWorker());
      await waitFor(() => done.length === 1, 'the retried job ran', 15_000);
      expect(done[0]!.result).toMatchObject({ dispatched: true });
    } finally {
      await manual.close(true);
    }
  }, 30_000);
});
