import { UnrecoverableError } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { fetchBy, heldExecutor } from '../../helpers/jobs';
import { onCluster } from '../../helpers/redis';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe("C12: a job's stage lock is tied to BullMQ's lock of that job (the processor hands over its token)", () => {
  (onCluster ? it.skip : it)(
    '12: once BullMQ finishes the job while its executor still runs, the stage is no longer in flight for another host',
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
        // the tied lock died with it: another host's call goes through at once (a plain lock would live on)
        expect((await other.engine.dispatchStage(image, {})).dispatched).toBe(true);
      } finally {
        held.release();
        await running;
      }
    },
  );
});
