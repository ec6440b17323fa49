import { UnrecoverableError, type Job } from 'bullmq';
import { harness, notSent } from '../../helpers/engine';
import { fetchBy, latch } from '../../helpers/jobs';
import { failedRecordsOf } from '../../helpers/observe';
import { onCluster, waitFor } from '../../helpers/redis';

/**
 * behaviours of src/bullmq/processor.ts that mutants of it
 * survived (docs/testing.md, "Surviving mutants"). Each test names the line's
 * behaviour it guards.
 */

const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

(onCluster ? describe.skip : describe)(
  'C27: a worker that lost BullMQ’s lock of its job (it stalled: redelivered) ends nothing',
  () => {
    it.each([
      ['the capacity bound', notSent('no_worker_available'), 'DEFERRAL_LIMIT'],
      ['a real failure with no attempt left', new UnrecoverableError('broken'), undefined],
    ] as const)(
      '%s: no failed-job record from the stalled worker; the redelivered job meets it itself',
      async (_what, answer, code) => {
        const gate = latch<void>();
        let calls = 0;
        const h = harness({
          limits: { maxCapacityDeferrals: 1, maxIdempotentDeferrals: 3 },
          executor: async () => {
            calls += 1;
            if (calls === 2) await gate.opened;
            if (calls === 1) return notSent('no_worker_available');
            if (answer instanceof Error) throw answer;
            return answer;
          },
        });
        // one capacity deferral: the chain is at its bound (1); its wake-up is due at once
        expect(await h.engine.dispatchStage(image, {})).toMatchObject({ until: expect.any(Number) });
        expect((await h.engine.wakeDeferred({})).woken).toHaveLength(1);
        const job: Job = await fetchBy(h, 'bull-1');
        // worker A runs it; while its executor runs, A stalls past BullMQ's lockDuration and the job
        // is handed to worker B (BullMQ's lock of it now holds B's token)
        const a = (h.engine.processor(job, 'bull-1') as Promise<unknown>).catch((e: unknown) => e);
        await waitFor(() => calls === 2, "A's executor to start");
        await h.redis.set(`${h.prefix}:${h.queueName}:${job.id}:lock`, 'bull-2');
        gate.open();
        // A: quiet (DelayedError: BullMQ would refuse its failure), and no failed-job record
        expect(await a).toMatchObject({ name: 'DelayedError' });
        expect(await failedRecordsOf(h.redis, h, image)).toEqual([]);
        // B: the same chain, so the same end: the job fails for good, recorded; no new deferral
        const b = await (h.engine.processor(job, 'bull-2') as Promise<unknown>).catch((e: unknown) => e);
        if (code) expect(b).toMatchObject({ code });
        else expect(b).toMatchObject({ message: 'broken' });
        expect(await failedRecordsOf(h.redis, h, image)).toEqual([job.id]);
      },
    );
  },
);
