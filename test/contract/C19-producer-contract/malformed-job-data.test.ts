import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { completions } from '../../helpers/attempts';

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C19: malformed job data', () => {
  it('fails that job unrecoverably; other jobs are unaffected', async () => {
    const h = harness();
    await h.engine.queue.add('image', { v: 1, scope: 'not-an-array' }, { attempts: 5 });
    await h.engine.queue.add('image', { v: 1, scope: [], stage: 'image', payload: 1 }, { attempts: 5 });
    await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { done, failed } = completions(h, worker);
    await waitFor(() => done.length === 1 && failed.length === 2, 'one done, two failed');
    for (const f of failed) expect(f.attemptsMade).toBe(1);
    expect(failed.map((f) => f.message).join()).toMatch(/Malformed dispatch job/);
    expect(failed.map((f) => f.message).join()).toMatch(/scope/);
    expect(h.executor.calls).toHaveLength(1);
  });

  it('a job of a plain queue.add fails at once, unrecoverably, with a message that says to add it with engine.enqueue', async () => {
    const h = harness();
    await h.engine.queue.add('image', { sceneUrl: 's3://scenes/7' }, { attempts: 5 });
    const worker = h.engine.createWorker();
    const { failed } = completions(h, worker);
    await waitFor(() => failed.length === 1, 'the plain job failed');
    expect(failed[0]!.attemptsMade).toBe(1);
    expect(failed[0]!.message).toMatch(/add dispatch jobs with `engine\.enqueue\(ref, payload\)`/);
    expect(h.executor.calls).toHaveLength(0);
  });
});
