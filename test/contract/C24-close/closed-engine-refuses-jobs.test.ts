import { harness } from '../../helpers/engine';
import { fetchBy } from '../../helpers/jobs';

describe('C24: a closed engine refuses every job without spending an attempt', () => {
  it('a job whose data is malformed is re-delayed too, not failed for good (the check runs on the next worker)', async () => {
    const h = harness();
    await h.engine.queue.add('image', { v: 1, scope: 'not-a-list', stage: 'image' });
    // the job as a user's own Worker holds it (on a connection of its own: the engine's is closed)
    const job = await fetchBy(h, 'bull-1');
    await h.engine.close();
    await expect(h.engine.processor(job, 'bull-1')).rejects.toMatchObject({ name: 'DelayedError' });
    expect(await job.getState()).toBe('delayed');
    expect(h.executor.calls).toEqual([]);
  });
});
