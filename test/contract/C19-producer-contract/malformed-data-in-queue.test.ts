import { harness } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';

describe('C19: malformed job data added straight to the queue', () => {
  it('fails that job unrecoverably (no retries); the other jobs are unaffected', async () => {
    const dispatched: string[] = [];
    const { engine } = harness({
      executor: async (ref) => {
        dispatched.push(ref.stage);
        return { dispatched: true, jobs: 1, reason: null };
      },
      retry: { attempts: 5, backoff: { type: 'fixed', delay: 0 } },
      windows: undefined,
    });
    const bad: unknown[] = [
      null,
      'a string',
      42,
      {},
      { v: 2, scope: ['a'], stage: 's', payload: 1 },
      { v: 1, scope: 'a', stage: 's', payload: 1 },
      { v: 1, scope: [], stage: 's', payload: 1 },
      { v: 1, scope: ['a'], stage: '', payload: 1 },
      { v: 1, scope: ['a', 7], stage: 's', payload: 1 },
      { v: 1, scope: ['\uD800'], stage: 's', payload: 1 },
      { v: 1, scope: ['a'], stage: 's', payload: 1, wakeUp: 'yes' },
      { v: 1, scope: ['a'], stage: 's', payload: 1, class: 'other' },
      { v: 1, scope: Array(9).fill('a'), stage: 's', payload: 1 },
    ];
    const badIds: string[] = [];
    for (const [i, data] of bad.entries()) {
      const job = await engine.queue.add('bad', data as never, { attempts: 5, jobId: `bad@${i}` });
      badIds.push(job.id as string);
    }
    const good = [1, 2, 3].map((i) => ({ scope: ['good'], stage: `s${i}` }));
    for (const ref of good) await engine.enqueue(ref, {});
    const worker = engine.createWorker({ concurrency: 4 });
    await waitFor(
      async () =>
        (await engine.queue.getJobCounts('failed')).failed === bad.length && dispatched.length === good.length,
      'bad jobs failed, good ones dispatched',
      60_000,
    );
    for (const id of badIds) {
      const job = (await engine.queue.getJob(id))!;
      expect({ id, state: await job.getState(), attemptsMade: job.attemptsMade }).toEqual({
        id,
        state: 'failed',
        attemptsMade: 1,
      });
    }
    expect(dispatched.sort()).toEqual(['s1', 's2', 's3']);
    await worker.close();
  }, 120_000);
});
