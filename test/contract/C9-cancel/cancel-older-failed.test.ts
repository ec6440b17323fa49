import { harness, teardown, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';
import { fast, sleep, watch } from '../../helpers/jobs';

/**
 * Contract: a retry by hand dispatches the stage "unless it is deferred, in
 * flight or was cancelled after it failed". The cancel only reaches the job
 * named by the stage's one licence member; any older failed job of the same
 * stage is not marked `sdc` and dispatches when an operator retries it.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C9: cancel does not reach every failed job of the stage', () => {
  it('two failed jobs, cancel, retry the OLDER one by hand: it must not dispatch', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, new Error('down #1'), new Error('down #2'));
    const first = await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the first job failed for good');
    // the failed job's `?` licence is not pending: enqueue adds a second job, which also fails for good
    expect((await h.engine.enqueue(image, {})).added).toBe(true);
    await waitFor(() => failed.length === 2, 'the second job failed for good');
    await h.engine.cancelActiveDispatch(image);
    // an operator retries the older failed job in Bull Board
    const older = (await h.engine.queue.getJob(first.jobId!))!;
    await older.retry('failed');
    await waitFor(() => done.length === 1, 'the retried job completed');
    expect(done[0]!.result).toMatchObject({ cancelled: true });
    expect(h.executor.calls).toHaveLength(2);
  });

  it('a failed job, the stage dispatched since, then cancelled: a retry by hand must not dispatch', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, new Error('down'), SENT);
    const first = await h.engine.enqueue(image, {});
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'failed for good');
    // the host's tick dispatches the stage (the `?` licence is revoked), then the user cancels it
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
    await h.engine.cancelActiveDispatch(image);
    await (await h.engine.queue.getJob(first.jobId!))!.retry('failed');
    await waitFor(() => done.length === 1, 'the retried job completed');
    expect(done[0]!.result).toMatchObject({ cancelled: true });
    expect(h.executor.calls).toHaveLength(2);
  });

  it('enqueue while an older failed job, retried by hand, is waiting: reports pending, adds nothing', async () => {
    const h = harness({ retry: { attempts: 1, backoff: fast } });
    h.executor.script(image, new Error('down #1'), new Error('down #2'));
    const first = await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'first failed');
    await h.engine.enqueue(image, {});
    await waitFor(() => failed.length === 2, 'second failed');
    await worker.close();
    // the operator retries the older one: it waits (no worker runs now)
    await (await h.engine.queue.getJob(first.jobId!))!.retry('failed');
    expect(await h.engine.queue.getJobState(first.jobId!)).toBe('waiting');
    const r = await h.engine.enqueue(image, {});
    expect(r).toMatchObject({ added: false, reason: 'pending' });
    await sleep(10);
  });
});
