import { UnrecoverableError } from 'bullmq';
import { harness, notSent } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A wake-up that failed for good, retried by hand, runs with a fresh chain (C16), and keeps it
 * through its real failures: its begin marks its licence fresh (`<id>!`, batch.lua's begin on a
 * job that finds its own failed-job record), so the failure's release leaves it so, and BullMQ's
 * retry of it goes on with the fresh chain. Were the fresh licence not written, the failure would
 * take the licence as the wake-up's own id, whose chain (one capacity deferral) the retry would
 * go on with: its deferral would count as the chain's second.
 */
const image: StageRef = { scope: ['book-40', 'ch-1', 'sc-2'], stage: 'image' };
const NO = notSent('no_worker_available');

describe('C16: a wake-up retried by hand keeps its fresh chain across a real failure', () => {
  it('C16: a failed wake-up retried by hand that fails for real, then defers on its retry, defers as the first capacity deferral of a fresh chain', async () => {
    const h = harness({ windows: { capacitySeconds: 60, jitter: 0 }, retry: { attempts: 3, backoff: fast } });
    h.executor.script(image, NO, new UnrecoverableError('refused for good'), new Error('executor crashed'), NO);
    const deferrals: number[] = [];
    h.engine.on('deferred', (e) => deferrals.push(e.deferrals));
    await h.engine.enqueue(image, {});
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => deferrals.length === 1, 'deferred');
    const wakeUpId = (await listedDeferral(h.engine, image))!.wakeUpJobId;
    // woken, the wake-up fails for good
    await h.engine.wakeDeferred({ stage: image.stage });
    await waitFor(() => failed.length === 1, 'the wake-up failed for good');
    expect(await h.engine.queue.getJobState(wakeUpId)).toBe('failed');
    // the operator retries it: it fails for real (attempts left), and BullMQ's retry of it defers
    await (await h.engine.queue.getJob(wakeUpId))!.retry('failed');
    await waitFor(() => deferrals.length === 2, 'the retry deferred');
    expect({ failed: failed.length, calls: h.executor.callsFor(image), deferrals }).toEqual({
      failed: 2,
      calls: 4,
      deferrals: [1, 1],
    });
    expect(await listedDeferral(h.engine, image)).toMatchObject({ class: 'capacity', deferrals: 1 });
  });
});
