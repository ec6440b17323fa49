import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { probe } from '../../helpers/visible';
import { waitFor } from '../../helpers/redis';

/**
 * A job neither the engine made nor a producer added by the published contract (a plain
 * `queue.add`, an id of its own) is no dispatch job: it fails at once with
 * INVALID_JOB_OPTIONS and the stage its data names knows nothing of it.
 */
const A = { scope: ['book-r9', 'ch-1'], stage: 'image' };
const data = { v: 1, scope: A.scope, stage: A.stage, payload: {} };

describe('C19: a job added by hand (not by the published contract) is refused', () => {
  it.each([
    ['a plain queue.add (BullMQ’s own id)', {}],
    ['an id of its own', { jobId: 'by-hand-7' }],
  ])(
    '%s: fails at once for good with INVALID_JOB_OPTIONS; no executor call, nothing held; the stage is enqueued, dispatched and cancelled as if it were not there',
    async (_, opts) => {
      const h = harness();
      h.executor.fallback = SENT;
      const job = await h.engine.queue.add('image', data, { attempts: 3, ...opts });
      const w = watch(h.engine.createWorker());
      await waitFor(() => w.failed.length === 1, 'the job was refused');
      expect(w.failed[0]).toMatchObject({ id: job.id, attemptsMade: 1, error: { code: 'INVALID_JOB_OPTIONS' } });
      expect(await h.engine.queue.getJobState(job.id!)).toBe('failed');
      expect(h.executor.calls).toHaveLength(0);
      expect(await probe(h, A)).toEqual({ kind: 'none' });
      // the stage goes on as if the job were not there
      const r = await h.engine.enqueue(A, {});
      expect(r).toMatchObject({ added: true });
      await waitFor(() => w.done.some((d) => d.id === r.jobId), 'the enqueued job ran');
      expect(h.executor.calls).toHaveLength(1);
      expect(await h.engine.cancelActiveDispatch(A)).toMatchObject({ removedJobs: 0 });
      // retried by hand, it is refused again
      await job.retry('failed');
      await waitFor(() => w.failed.length === 2, 'the retried job was refused');
      expect(w.failed[1]!.error).toMatchObject({ code: 'INVALID_JOB_OPTIONS' });
      expect(h.executor.calls).toHaveLength(1);
    },
  );
});
