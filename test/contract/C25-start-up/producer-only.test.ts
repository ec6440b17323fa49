import { createDispatchEngine, NoExecutorError, type DispatchEngine, type StageRef } from '../../../src';
import { expectUnwritten, harness, notSent, SENT, snapshot, teardown } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';

/**
 * a scheduler or an API process that only enqueues, inspects and
 * signals needs no executor. Its engine does everything but dispatch; the
 * dispatching half (dispatchStage, processor, createWorker) refuses with a
 * typed error before anything is called or written.
 */
const producers: DispatchEngine[] = [];
afterEach(async () => {
  await Promise.all(producers.splice(0).map((p) => p.close()));
  await teardown();
});

/** An engine without an executor, on the queue of `shared` (the type check of this file proves `executor` is optional). */
function producerOnly(shared: { prefix: string; queueName: string }): DispatchEngine<{ n: number }> {
  const engine = createDispatchEngine<{ n: number }>({
    connection: redisOptions(),
    prefix: shared.prefix,
    queueName: shared.queueName,
  });
  producers.push(engine as DispatchEngine);
  return engine;
}

const image: StageRef = { scope: ['book-1', 'ch-1'], stage: 'image' };
const video: StageRef = { scope: ['book-1', 'ch-2'], stage: 'video' };
const audio: StageRef = { scope: ['book-1', 'ch-3'], stage: 'audio' };

describe('C25: a producer-only engine', () => {
  it('dispatchStage, processor and createWorker throw NoExecutorError and write nothing', async () => {
    const h = harness(); // another engine on the queue, with an executor: never called
    const producer = producerOnly(h);
    await producer.waitUntilReady();
    const before = await snapshot(h.redis, h.prefix);

    const refused = producer.dispatchStage(image, { n: 1 });
    await expect(refused).rejects.toBeInstanceOf(NoExecutorError);
    await expect(refused).rejects.toMatchObject({
      code: 'NO_EXECUTOR',
      method: 'dispatchStage',
      message: expect.stringMatching(/^This engine has no executor: it is producer-only/),
    });
    expect(() => producer.processor).toThrow(NoExecutorError);
    expect(() => producer.processor).toThrow(expect.objectContaining({ code: 'NO_EXECUTOR', method: 'processor' }));
    expect(() => producer.createWorker()).toThrow(
      expect.objectContaining({ code: 'NO_EXECUTOR', method: 'createWorker' }),
    );

    expectUnwritten(before, await snapshot(h.redis, h.prefix));
    expect(h.executor.calls).toEqual([]);
    await producer.close(); // nothing to wait for: no worker, no connection of its own left open
  });

  it('enqueue, isStageDeferred, listDeferred, wakeDeferred, clearDeferrals and cancelActiveDispatch work', async () => {
    const h = harness(); // the workers' engine, with the executor
    const producer = producerOnly(h);
    h.executor.fallback = notSent('no_worker_available');

    // the producer enqueues; the workers' engine runs the jobs and defers all three for capacity
    for (const ref of [image, video, audio]) {
      expect(await producer.enqueue(ref, { n: 1 })).toMatchObject({ added: true, reason: null });
    }
    expect(await producer.enqueue(image, { n: 1 })).toMatchObject({ added: false, reason: 'pending' });
    h.engine.createWorker();
    const listed = await waitFor(async () => {
      const rows = await producer.listDeferred(['book-1']);
      return rows.length === 3 ? rows : null;
    }, 'three deferred stages, seen by the producer');
    expect(listed.map((d) => d.ref.stage).sort()).toEqual(['audio', 'image', 'video']);
    expect(listed.every((d) => d.class === 'capacity' && d.reason === 'no_worker_available')).toBe(true);
    expect(await producer.isStageDeferred(image)).toBe(true);

    // a deferred stage: enqueue is one read and no write (BullMQ's `marker` key, which the running
    // worker pops while it waits for jobs, is the worker's, not the producer's: left out)
    const mine = async () => {
      const all = await snapshot(h.redis, h.prefix);
      for (const key of [...all.keys()]) if (key.endsWith(':marker')) all.delete(key);
      return all;
    };
    const before = await mine();
    expect(await producer.enqueue(image, { n: 2 })).toMatchObject({ added: false, reason: 'deferred' });
    expectUnwritten(before, await mine());

    // capacity returned: the producer signals, the workers dispatch
    h.executor.fallback = SENT;
    expect(await producer.wakeDeferred({ stage: 'image' })).toEqual({ woken: [image] });
    await waitFor(() => h.executor.callsFor(image) === 2, 'the woken image stage to be dispatched');
    expect(await producer.clearDeferrals(['book-1', 'ch-2'])).toBe(1);
    await waitFor(() => h.executor.callsFor(video) === 2, 'the cleared video stage to be dispatched');
    expect(await producer.cancelActiveDispatch(audio, 'book deleted')).toMatchObject({
      hadDeferral: true,
      removedJobs: 1,
      reason: 'book deleted',
    });

    expect(await producer.listDeferred()).toEqual([]);
    expect(await producer.isStageDeferred(audio)).toBe(false);
    expect(h.executor.callsFor(audio)).toBe(1);
  });
});
