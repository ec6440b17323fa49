import { harness, SENT } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import { keptFor } from '../../helpers/visible';
import { addProducerJob } from '../../helpers/producer-job';

/**
 * A producer job that fails for good: recorded (a cancel reaches it) when BullMQ keeps it.
 */
const image = { scope: ['book-14', 'ch-2', 'sc-7'], stage: 'image' };
const crash = new Error('executor crashed');

describe('C16: a producer job that fails for good', () => {
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
      const { id } = await addProducerJob(h.engine.queue, image, { attempts: 1, removeOnFail: rof });
      const { failed } = watch(h.engine.createWorker());
      await waitFor(() => failed.length === 1, 'the job failed for good');
      expect(await h.engine.queue.getJob(id!)).toBeUndefined();
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
      const { id } = await addProducerJob(h.engine.queue, image, { attempts: 1, removeOnFail: rof });
      const { done, failed } = watch(h.engine.createWorker());
      await waitFor(() => failed.length === 1, 'the job failed for good');
      expect(await h.engine.queue.getJobState(id!)).toBe('failed');
      await h.engine.cancelActiveDispatch(image);
      await (await h.engine.queue.getJob(id!))!.retry('failed');
      await waitFor(() => done.length === 1, 'the job retried by hand completed');
      expect(done[0]!.result).toMatchObject({ dispatched: false });
      expect(h.executor.calls).toHaveLength(1);
    },
  );
});

describe('C16: a job retried by hand after failing for good', () => {
  it('with resetAttemptsMade gets one fresh budget, not one per attempt: it fails for good again after its attempts', async () => {
    const h = harness({ retry: { attempts: 2, backoff: fast } });
    h.executor.script(image, crash, crash, crash, crash, crash, crash);
    const { id } = await addProducerJob(h.engine.queue, image, { attempts: 2, backoff: fast });
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 2, 'failed for good (2 attempts)');
    expect(await h.engine.queue.getJobState(id!)).toBe('failed');
    await (await h.engine.queue.getJob(id!))!.retry('failed', { resetAttemptsMade: true });
    await waitFor(
      async () => h.executor.calls.length >= 4 && (await h.engine.queue.getJobState(id!)) === 'failed',
      'failed for good again after 2 more attempts',
    );
    expect(h.executor.calls).toHaveLength(4);
  });
});

describe('C16: a job failed for good, then retried by hand, that sends the stage', () => {
  it('dispatches once and ends its chain: nothing of the stage is kept afterwards', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, crash, SENT);
    const { id } = await addProducerJob(h.engine.queue, image, { attempts: 1, removeOnFail: false });
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the job failed for good');
    expect(await keptFor(h, image)).not.toEqual([]);
    await (await h.engine.queue.getJob(id!))!.retry('failed');
    await waitFor(() => done.length === 1, 'the job retried by hand completed');
    expect(done[0]!.result).toMatchObject({ dispatched: true });
    expect(h.executor.calls).toHaveLength(2);
    // its failed-job record went when it ran again: the success leaves nothing of the stage
    await waitFor(async () => (await keptFor(h, image)).length === 0, 'nothing of the stage kept', 3000).catch(
      async () => expect(await keptFor(h, image)).toEqual([]),
    );
  });
});
