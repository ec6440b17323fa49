import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { crashAfterFail } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Docs/design.md, Keys table, `sdf`: "finished (BullMQ's `atm` when the engine saw it
 * fail for good …: a later run with another `atm` is a retry by hand, a redelivery after a crash
 * keeps the same one)" — and so is NOT a retry by hand. BATCH's begin (src/lua/scripts.ts) also
 * treats as a retry by hand any run while the job's `<member>?` record exists ("or it is running
 * again while recorded as failed for good"). The engine writes that record (FAIL, in
 * `failForGood`) BEFORE BullMQ moves the job to failed: a worker that crashes or freezes past its
 * lock between the two leaves the job active with its record; the stalled check redelivers it,
 * and the redelivery is taken for a retry by hand: a fresh chain and a fresh budget (here 3 more
 * executor calls instead of the one a plain BullMQ redelivery costs). The retry budget is not
 * kept ("a real failure uses the normal retry budget"); a capacity chain at its bound likewise
 * starts again from 0 deferrals.
 * The crash is simulated on the user's own Worker: after the engine's processor threw the job's
 * final (unrecoverable) failure, the wrapper drops BullMQ's lock of the job and waits for the
 * stalled check to hand the job on before it lets the error reach BullMQ (which then refuses it).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C14: a crash between the failed-job record and BullMQ failing the job', () => {
  it('a job redelivered after a crash between FAIL and BullMQ moving it to failed is no retry by hand: it runs once more and fails for good (was a fresh budget: 3 more calls)', async () => {
    const h = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(image, ...Array.from({ length: 10 }, (_, i) => new Error(`downstream 500 #${i + 1}`)));
    const { jobId } = await h.engine.enqueue(image, {});
    const { worker, crashed } = crashAfterFail(h, (_job, error) => error.name === 'UnrecoverableError');
    try {
      const finals: string[] = [];
      worker.on('failed', (job) => void (job?.finishedOn && finals.push(job.id!)));
      await waitFor(() => crashed.job !== undefined, 'the final failure, then the crash', 10_000);
      await waitFor(() => finals.includes(jobId!), 'the redelivered job failed for good', 15_000);
      // BullMQ's own behaviour on such a crash: the job runs once more (its count was never moved)
      expect({ calls: h.executor.callsFor(image), state: await h.engine.queue.getJobState(jobId!) }).toEqual({
        calls: 4,
        state: 'failed',
      });
    } finally {
      await worker.close();
    }
  }, 30_000);
});
