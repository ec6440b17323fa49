import { Worker } from 'bullmq';
import { harness, teardown } from '../../helpers/engine';
import { redisOptions } from '../../helpers/redis';
import { deferredOnce, runWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';

/**
 * BullMQ promotes due delayed jobs (up to 1000 at a time) in moveToActive by
 * the clock of whichever worker fetches next, and any worker may then take
 * them. Fixed: every engine host that runs a Worker records its clock's lead
 * over Redis (when over 50 ms) in `sd:lead` when it starts (before its worker
 * fetches) and on every batch; the tolerance of a wake-up that starts early is the largest
 * lead of the fleet. (A host that fetches from the dispatch queue without an
 * engine cannot be known: documented.) A fleet with one host whose clock
 * runs ahead (here 6 s) promotes a wake-up early; a host with a right clock
 * takes it, sees more than its tolerance left on the marker, takes it for
 * Bull Board's Promote, and dispatches inside the window.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C4: a wake-up promoted by another host whose clock runs ahead', () => {
  it('is not dispatched inside its window by a host with the right clock', async () => {
    const real = Date.now.bind(Date);
    const { h, until } = await deferredOnce(image, 5);
    // host A: a plain BullMQ worker of the fleet (another service's jobs on the queue, or a worker
    // between two jobs) whose clock is 6 s ahead fetches its next job: BullMQ promotes every job
    // due by A's clock, the wake-up too, and A takes the oldest waiting job (its own)
    await h.engine.queue.add('other', { v: 1, scope: ['x'], stage: 'other', payload: {} });
    const a = new Worker(h.queueName, undefined, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      autorun: false,
    });
    try {
      jest.spyOn(Date, 'now').mockImplementation(() => real() + 6000);
      // host A runs the engine's processor in its Worker (as every worker of a dispatch queue
      // does): ready before it fetches
      const onA = harness({}, { prefix: h.prefix, queueName: h.queueName });
      expect(typeof onA.engine.processor).toBe('function');
      await onA.engine.waitUntilReady();
      const taken = await a.getNextJob('host-a');
      jest.restoreAllMocks();
      expect(taken?.name).toBe('other');
      expect(await h.engine.queue.getJobCounts('wait', 'delayed')).toMatchObject({ wait: 1, delayed: 0 });
      // host B, right clock, runs the engine's worker
      const { result, calledAt } = await runWakeUp(h, real);
      expect(result).toMatchObject({ dispatched: true });
      // Redis and this machine share a clock
      expect(calledAt).toBeGreaterThanOrEqual(until);
    } finally {
      await a.close(true);
    }
  });
});
