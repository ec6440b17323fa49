import type { StageRef } from '../../src';
import { buildOnce } from '../helpers/build';
import { harness, notSent, SENT } from '../helpers/engine';
import { settledState, sleep, watch } from '../helpers/jobs';
import { waitFor } from '../helpers/redis';
import { cliOn } from './run';

/**
 * The CLI's stage forms and exit 3 (C29) at their edges: a cancel that reaches only a failed job,
 * a job added by hand that `show` does not look for, a raw `@` that is no part of a stage id.
 */
const image: StageRef = { scope: ['book-1', 'ch-2'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

beforeAll(() => buildOnce(), 120_000);

describe('C29: stage forms and exit 3 at their edges', () => {
  // a cancel marks the stage's failed-for-good job cancelled (a retry by hand then sends nothing):
  // that is a match, exit 0
  it('C29: cancel of a stage whose only job failed for good is not "nothing matched" (exit 3)', async () => {
    const h = harness({ retry: { attempts: 1, backoff: { type: 'fixed', delay: 10 } } });
    h.executor.script(image, new Error('downstream 500'));
    h.executor.fallback = SENT;
    const { jobId } = await h.engine.enqueue(image, {});
    const worker = h.engine.createWorker();
    const { failed } = watch(worker);
    await waitFor(() => failed.length === 1, 'failed for good');
    await worker.close();
    const shown = await cliOn(h, '--json', 'show', 'book-1/ch-2/image');
    expect(JSON.parse(shown.stdout)).toMatchObject({ state: 'failed' });

    const r = await cliOn(h, '--json', 'cancel', 'book-1/ch-2/image');
    // the cancel acted: retried by hand, the failed job sends nothing
    await (await h.engine.queue.getJob(jobId!))!.retry('failed');
    const again = h.engine.createWorker();
    await settledState(h.engine.queue, jobId!);
    await again.close();
    expect({ code: r.code, stderr: r.stderr, callsAfterCancel: h.executor.callsFor(image) - 1 }).toEqual({
      code: 0,
      stderr: '',
      callsAfterCancel: 0,
    });
  });

  // a job added by hand with BullMQ's own id and no deduplication id is not looked for (that would
  // read the whole queue): show says so rather than claiming the stage is unknown
  it('C29: show of a stage whose only job was added by hand without the contract says what it did not look for', async () => {
    const h = harness();
    await h.engine.queue.add('image', data); // waiting: no worker yet
    const r = await cliOn(h, '--json', 'show', 'book-1/ch-2/image');
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/a job added by hand without the contract's deduplication id is not looked for/);
  });

  // a raw `@` never occurs in a stage id (it is %40): `book-1/ch-2@draft/image` is not the stage
  // book-1:ch-2 with a job id's tail, it is refused
  it('C29: a raw `@` inside a segment is refused (exit 2), not read as another stage', async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    const other: StageRef = { scope: ['book-1'], stage: 'ch-2' };
    h.executor.script(other, notSent('no_worker_available'));
    await h.engine.dispatchStage(other, {});
    const r = await cliOn(h, '--json', 'cancel', 'book-1/ch-2@draft/image');
    await sleep(10);
    expect({ code: r.code, otherStillDeferred: await h.engine.isStageDeferred(other) }).toEqual({
      code: 2,
      otherStillDeferred: true,
    });
  });
});
