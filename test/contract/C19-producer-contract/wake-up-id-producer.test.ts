import { harness } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * Check of a producer that copies the id of a job it saw in Bull
 * Board (a wake-up's `<stageId>@cap.…`) instead of the `@r.` form. The doc
 * says a producer never writes those; the worker must say so, not complete
 * the job as a stale wake-up without a word.
 */
const ref = { scope: ['book-1'], stage: 'image' };
const sid = 'book-1/image';

describe('C19: a producer job with a wake-up id', () => {
  it('a job with a wake-up id but no wake-up data (no reason/class, no wakeUp) fails with INVALID_JOB_OPTIONS, not completed as a stale wake-up', async () => {
    const h = harness();
    const id = `${sid}@cap.0.0.0.mx3p0000ab12`;
    await h.engine.queue.add(
      ref.stage,
      { v: 1, scope: ref.scope, stage: ref.stage, payload: null },
      {
        jobId: id,
        attempts: 3,
        backoff: { type: 'exponential', delay: 1000 },
        removeOnComplete: true,
      },
    );
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length + failed.length === 1, 'the job to finish');
    expect(done).toEqual([]);
    expect(failed.map((f) => [f.id, (f.error as Error & { code?: string }).code])).toEqual([
      [id, 'INVALID_JOB_OPTIONS'],
    ]);
  });
});
