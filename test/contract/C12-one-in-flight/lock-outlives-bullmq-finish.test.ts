import { UnrecoverableError } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { fetchBy, heldExecutor } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';

/** The processor hands BullMQ's token over; the stage lock still lives by its own TTL. */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C12: a job's stage lock outlives BullMQ's finish of the job", () => {
  (onCluster ? it.skip : it)(
    '12: once BullMQ fails the job while its executor still runs, the stage stays in flight for another host until the attempt ends',
    async () => {
      const held = heldExecutor(SENT);
      const h = harness({ executor: held.executor });
      const other = harness({}, { prefix: h.prefix, queueName: h.queueName });
      other.executor.script(image, SENT);
      await h.engine.enqueue(image, {});
      const job = await fetchBy(h, 'bull-1');
      const running = h.engine.processor(job, 'bull-1').catch((e: Error) => e);
      try {
        await held.running;
        expect((await other.engine.dispatchStage(image, {})).reason).toBe('dispatch_in_flight');
        // BullMQ fails the job for good with the worker's own token (its lock deleted, finishedOn set)
        await job.moveToFailed(new UnrecoverableError('ended by BullMQ'), 'bull-1');
        expect(await job.getState()).toBe('failed');
        // the executor still runs: another host's call finds the stage in flight
        expect((await other.engine.dispatchStage(image, {})).reason).toBe('dispatch_in_flight');
      } finally {
        held.release();
        await running;
      }
      // the attempt ended (its release, maybe lazy, deletes the lock): a call then goes through
      await waitFor(async () => (await other.engine.dispatchStage(image, {})).dispatched, 'the stage free again');
      expect(other.executor.callsFor(image)).toBe(1);
    },
  );
});
