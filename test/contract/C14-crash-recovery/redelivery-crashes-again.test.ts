import { UnrecoverableError } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { fetchBy, settledState, stalledCheck, watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';
import { probe } from '../../helpers/visible';

/**
 * A job fails for good (the processor's FAIL recorded it, `<member>?`) and its worker dies before
 * BullMQ failed it; its redelivery begins (a fresh chain: it takes the stage as its licence
 * holder) and its worker dies too, before the executor was called: BullMQ hands the job on
 * once more. Meanwhile another host sends the stage. The job's next run must not send the stage
 * a second time (C14: never a second send).
 */
const a: StageRef = { scope: ['r35-again', 'ch-1', 'sc-1'], stage: 'image' };

describe('C14: a redelivery after a crash between FAIL and BullMQ, whose worker dies again right after its begin', () => {
  it('its next redelivery sends nothing when the stage went out meanwhile', async () => {
    let frozen!: () => void;
    const hit: string[] = [];
    const freeze = new Promise<void>((r) => (frozen = r));
    const h = harness({
      retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } },
      lockMs: 1000,
      // the second run's worker freezes right after its begin took the stage's lock
      faultHook: async (point) => {
        if (point !== 'lock-taken') return;
        hit.push(point);
        if (hit.length === 2) await freeze;
      },
    });
    h.executor.script(a, new UnrecoverableError('refused for good'), SENT, SENT);
    const base = `${h.prefix}:${h.queueName}:`;
    const redis = client();
    const { jobId } = await h.engine.enqueue(a, {});
    const J = `${base}${jobId}`;
    try {
      // run 1 fails for good, recorded (FAIL); its worker dies before BullMQ fails the job
      const run1 = await fetchBy(h, 'tok-1');
      await expect(h.engine.processor(run1, 'tok-1')).rejects.toThrow('refused for good');
      expect({ state: await h.engine.queue.getJobState(jobId!), probe: await probe(h, a) }).toEqual({
        state: 'active',
        probe: { kind: 'pending', jobId },
      });
      await redis.del(`${J}:lock`);
      await stalledCheck(h, redis, J, 0);

      // run 2, the redelivery: its begin takes the lock, then its worker freezes (no executor call)
      const run2 = await fetchBy(h, 'tok-2');
      void h.engine.processor(run2, 'tok-2').catch(() => undefined);
      await waitFor(() => hit.length === 2, 'the redelivery began', 10_000);
      expect(h.executor.callsFor(a)).toBe(1);
      // it dies (its connection goes: no more lock renewals): BullMQ's stalled check hands the job on once more
      (await redisClient(h.engine.queue)).disconnect();
      await redis.del(`${J}:lock`);
      await stalledCheck(h, redis, J, 1);

      // meanwhile another host sends the stage directly
      const other = harness({ retry: { attempts: 3, backoff: { type: 'fixed', delay: 10 } } }, h);
      other.executor.script(a, SENT, SENT);
      // (once the dead run's stage lock expired: lockMs)
      await waitFor(async () => (await probe(h, a)).kind !== 'in_flight', "the dead run's lock expired", 10_000);
      expect(await other.engine.dispatchStage(a, {})).toMatchObject({ dispatched: true });

      // the job's next run: the stage went out meanwhile (the chain end took the stage from the
      // job, which carried it as a fresh chain, and removed it), it sends nothing
      const { done } = watch(other.engine.createWorker());
      const state = await settledState(other.engine.queue, jobId!);
      const sends = other.executor.callsOf(a).filter((c) => c.result?.dispatched).length;
      expect({ sends, state, runs: done.filter((d) => d.result.dispatched).length }).toEqual({
        sends: 1,
        state: null,
        runs: 0,
      });
    } finally {
      frozen();
    }
  }, 40_000);
});
