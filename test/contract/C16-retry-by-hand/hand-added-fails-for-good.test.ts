import { harness, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';

/**
 * Behaviours the Lua mutation run (scripts/mutate-lua.ts, docs/testing.md
 * "The Lua") found unguarded: each test here fails with one surviving mutant
 * applied. They go through the public API and BullMQ's own job states only.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
/** A job added by hand (its id is not the engine's), with the data a dispatch job carries. */
const handData = { v: 1, scope: image.scope, stage: image.stage, payload: { p: 1 } };
const crash = new Error('executor crashed');

describe('C16: a job added by hand that fails for good', () => {
  it.each([
    ['true', true],
    ['0', 0],
    ['{ count: 0 }', { count: 0 }],
    ['{ age: 0 }', { age: 0 }],
  ] as const)(
    '7.fail: with removeOnFail %s (BullMQ removes it as it fails) leaves no failed-job record',
    async (_, rof) => {
      const h = harness({ retry: { attempts: 1, backoff: fast } });
      h.executor.script(image, crash);
      await h.engine.queue.add('image', handData, { jobId: 'gone-1', attempts: 1, removeOnFail: rof });
      const { failed } = watch(h.engine.createWorker());
      await waitFor(() => failed.length === 1, 'the job failed for good');
      expect(await h.engine.queue.getJob('gone-1')).toBeUndefined();
      expect(await keptFor(h, image)).toEqual([]);
    },
  );

  it.each([
    ['5', 5],
    ['{ age: 3600 }', { age: 3600 }],
    ['{ age: 0, limit: 0 } (BullMQ removes none)', { age: 0, limit: 0 }],
  ] as const)(
    'with removeOnFail %s (kept a while) is recorded: a cancel reaches it, a retry of it by hand does not dispatch',
    async (_, rof) => {
      const h = harness({ retry: { attempts: 1, backoff: fast } });
      h.executor.script(image, crash, SENT);
      await h.engine.queue.add('image', handData, { jobId: 'kept-2', attempts: 1, removeOnFail: rof });
      const { done, failed } = watch(h.engine.createWorker());
      await waitFor(() => failed.length === 1, 'the job failed for good');
      expect(await h.engine.queue.getJobState('kept-2')).toBe('failed');
      await h.engine.cancelActiveDispatch(image);
      await (await h.engine.queue.getJob('kept-2'))!.retry('failed');
      await waitFor(() => done.length === 1, 'the job retried by hand completed');
      expect(done[0]!.result).toMatchObject({ dispatched: false });
      expect(h.executor.calls).toHaveLength(1);
    },
  );
});

describe('C16: a job retried by hand after failing for good', () => {
  it('gets one fresh budget, not one per attempt: it fails for good again after its attempts', async () => {
    const h = harness({ retry: { attempts: 2, backoff: fast } });
    h.executor.script(image, crash, crash, crash, crash, crash, crash);
    await h.engine.queue.add('image', handData, { jobId: 'again-1', attempts: 2, backoff: fast });
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 2, 'failed for good (2 attempts)');
    expect(await h.engine.queue.getJobState('again-1')).toBe('failed');
    await (await h.engine.queue.getJob('again-1'))!.retry('failed');
    // (BullMQ's attempts are spent: the engine retries the second of the two itself, quietly)
    await waitFor(
      async () => h.executor.calls.length >= 4 && (await h.engine.queue.getJobState('again-1')) === 'failed',
      'failed for good again after 2 more attempts',
    );
    expect(h.executor.calls).toHaveLength(4);
  });
});
