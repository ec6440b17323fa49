import { stageId } from '../../../src/stage-ref';
import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/** Job ids outside the published forms (`<stageId>@r.…`, the engine's wake-ups): the job is refused, never dispatched. */
const A = { scope: ['book-r10', 'ch-1'], stage: 'image' };

describe('C20: job ids outside the published forms (an id of its own, one ending in "!" or "?", "<stageId>@j.<id>", "<stageId>@x…") are refused', () => {
  it.each([
    ['an id of its own', 'by-hand-7'],
    ['an id "<stageId>@x<n>"', `${stageId(A)}@x1`],
    ['an id ending in "!"', 'x!'],
    ['an id ending in "?"', 'x?'],
    ['an id "<stageId>@j.<n>"', `${stageId(A)}@j.q1`],
  ])('%s: the job fails for good as INVALID_JOB_OPTIONS, the executor never called', async (_, id) => {
    const h = harness();
    h.executor.fallback = SENT;
    await h.engine.queue.add(
      'image',
      { v: 1, scope: A.scope, stage: A.stage, payload: {} },
      { jobId: id, attempts: 3 },
    );
    const w = watch(h.engine.createWorker());
    await waitFor(() => w.failed.length === 1, `job ${id} failed`);
    expect(w.failed[0]!.error).toMatchObject({ code: 'INVALID_JOB_OPTIONS' });
    expect(h.executor.calls).toHaveLength(0);
    expect(await h.engine.queue.getJobState(id)).toBe('failed');
  });
});
