import { harness, SENT } from '../../helpers/engine';
import { onCluster, waitFor } from '../../helpers/redis';
import { fetchBy, latch, sleep, watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * A worker host stalls for LESS than `lockMs` but more than
 * BullMQ's `lockDuration` (a GC pause, an event loop blocked, BullMQ's lock
 * renewal lost) while its executor runs. BullMQ redelivers the job; the
 * redelivery finds the stage in flight and is delayed (design.md: "the
 * redelivered job waits while the lock lives"). The stalled attempt then
 * resumes, its executor answers `dispatched`, its release ends the stage lock
 * (nothing marks the job), and BullMQ refuses its completion (its token is
 * stale). The redelivered job then begins with no lock, no licence and no
 * marker, and sends the stage a SECOND time, though the two attempts never
 * overlapped and the lock was held throughout. README: "Only a process frozen
 * past `lockMs` that then resumes can overlap another attempt"; design.md
 * "Why no stage is doubled".
 *
 * The stalled worker is simulated by BullMQ's manual fetch (its lock is
 * never renewed, lockDuration 300 ms) running `engine.processor(job, token)`.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

(onCluster ? describe.skip : describe)(
  'C14: a worker stalled shorter than lockMs, whose executor then succeeds',
  () => {
    it('the redelivered job does not send the stage again after the stalled attempt sent it', async () => {
      const frozen = harness({ lockMs: 5000, inFlightRetryMs: 100 });
      const other = harness({ lockMs: 5000, inFlightRetryMs: 100 }, frozen);
      const resume = latch();
      const started = latch();
      frozen.executor.script(image, async () => {
        started.open();
        await resume.opened; // the "freeze": longer than lockDuration (300 ms), shorter than lockMs (5 s)
        return SENT;
      });
      await frozen.engine.enqueue(image, {});
      const job = await fetchBy(frozen, 'frozen-token', 300);
      const late = frozen.engine.processor(job, 'frozen-token');
      await started.opened;

      // another host's worker: its stalled check hands the job on, and the redelivery meets the stage in flight
      const worker = other.engine.createWorker({ stalledInterval: 200 });
      const { done, failed } = watch(worker);
      const delayed = await waitFor(
        async () => (await other.engine.queue.getJobState(job.id!)) === 'delayed',
        'the redelivered job delayed as in flight',
      );
      expect(delayed).toBe(true);
      expect(other.executor.callsFor(image)).toBe(0);

      resume.open();
      const r = await late;
      expect(r).toMatchObject({ dispatched: true }); // the stage was sent, once, by the stalled attempt
      await job.moveToCompleted(r, 'frozen-token').catch(() => undefined); // BullMQ refuses: the token is stale

      await waitFor(() => done.length + failed.length >= 1, 'the redelivered job settled');
      await sleep(100);
      expect({
        sentByStalled: frozen.executor.callsFor(image),
        sentByRedelivery: other.executor.callsFor(image),
      }).toEqual({ sentByStalled: 1, sentByRedelivery: 0 });
    });
  },
);
