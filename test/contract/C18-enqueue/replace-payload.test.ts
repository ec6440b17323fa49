import { InvalidOptionsError, type StageRef } from '../../../src';
import { harness, LONG_WINDOWS, notSent, SENT } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * An enqueue while the stage is deferred or pending: its payload is not taken (and the answer
 * says so) unless `replace: true`, with which the newest payload wins for the stage's job that
 * has not begun, as BullMQ's deduplication `replace` does.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C18: enqueue of a stage that is deferred or pending, with and without replace', () => {
  it('while deferred: without replace the payload is not taken; with replace the wake-up runs the newest payload and buildId', async () => {
    // (a window of 10 min: the stage is still deferred at both enqueues, however slow the machine;
    // wakeDeferred then ends it, instead of waiting for it)
    const h = harness({ windows: LONG_WINDOWS });
    h.executor.script(image, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(image, { v: 1 }, { buildId: 'b-1' });
    expect(await h.engine.enqueue(image, { v: 2 })).toMatchObject({
      added: false,
      reason: 'deferred',
      payloadTaken: false,
    });
    expect(await h.engine.enqueue(image, { v: 3 }, { buildId: 'b-3', replace: true })).toMatchObject({
      added: false,
      reason: 'deferred',
      payloadTaken: true,
    });
    expect((await h.engine.wakeDeferred()).woken).toEqual([image]);
    h.engine.createWorker();
    await waitFor(() => h.executor.callsFor(image) === 2, 'the wake-up ran');
    expect(h.executor.callsOf(image)[1]).toMatchObject({ payload: { v: 3 }, buildId: 'b-3' });
  });

  it('while a job waits: replace makes it run with the newest payload; without it the first stands', async () => {
    const h = harness();
    const first = await h.engine.enqueue(image, { v: 1 });
    expect(first).toMatchObject({ added: true, payloadTaken: true });
    expect(await h.engine.enqueue(image, { v: 2 })).toMatchObject({
      added: false,
      reason: 'pending',
      jobId: first.jobId,
      payloadTaken: false,
    });
    expect(await h.engine.enqueue(image, { v: 3 }, { replace: true })).toMatchObject({
      added: false,
      jobId: first.jobId,
      payloadTaken: true,
    });
    h.engine.createWorker();
    await waitFor(() => h.executor.callsFor(image) === 1, 'the job ran');
    expect(h.executor.callsOf(image)[0]!.payload).toEqual({ v: 3 });
  });

  it('while a dispatch of the stage is in flight: not taken, even with replace (its executor has its payload)', async () => {
    const h = harness();
    const started = latch();
    const gate = latch();
    h.executor.script(image, async () => {
      started.open();
      await gate.opened;
      return SENT;
    });
    const running = h.engine.dispatchStage(image, { v: 1 });
    await started.opened;
    expect(await h.engine.enqueue(image, { v: 2 }, { replace: true })).toMatchObject({
      added: false,
      reason: 'dispatch_in_flight',
      payloadTaken: false,
    });
    gate.open();
    await running;
    expect(h.executor.callsOf(image)[0]!.payload).toEqual({ v: 1 });
  });

  it('replace that is not a boolean is INVALID_OPTIONS before anything is written', async () => {
    const h = harness();
    const refused = h.engine.enqueue(image, {}, { replace: 'yes' as unknown as boolean });
    await expect(refused).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(refused).rejects.toThrow('Expected `replace` to be a boolean, got string');
    expect(await h.engine.queue.getJobCounts('wait', 'delayed')).toEqual({ wait: 0, delayed: 0 });
  });
});
