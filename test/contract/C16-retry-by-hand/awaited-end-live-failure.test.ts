import { Worker, type Job } from 'bullmq';
import { harness, SENT } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import { probe } from '../../helpers/visible';
import type { DispatchResult, StageRef } from '../../../src';

/**
 * rule, the branch its tests do not reach (a hand-applied mutant that dropped it
 * survived them): at an AWAITED chain end (the succeeding job's begin saw the failed-job record,
 * so its release is awaited, mode '1'), a record job still in the active list whose live worker
 * is about to fail it (BullMQ has not counted the failure: `atm` = `sdf`, and `sdt` is there) is
 * superseded only as a redelivery would be (`sds`, its marks kept): once BullMQ fails it, an
 * operator's retry by hand runs, also on a Worker of one's own that is not attached (no listener
 * writes the marks back). Manual processing stands for that Worker.
 */
const image: StageRef = { scope: ['book-30', 'ch-9', 'sc-1'], stage: 'image' };

describe('C16: an awaited chain end beside a job its live worker is failing', () => {
  it("a job failed for good whose worker fails it just after another job's awaited success sent the stage is not swallowed: an operator's retry of it dispatches", async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 503'), SENT, SENT);
    const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };
    await h.engine.queue.add('image', data, { jobId: 'r30c-x', attempts: 1 });
    await h.engine.queue.add('image', data, { jobId: 'r30c-y', attempts: 1 });
    const manual = new Worker(h.queueName, undefined, {
      connection: { ...redisOptions(), maxRetriesPerRequest: null },
      prefix: h.prefix,
      autorun: false,
      lockDuration: 10_000,
    });
    try {
      const x = (await manual.getNextJob('tok-x')) as Job;
      // x's last failure: recorded (`?`), BullMQ not told yet (its worker is alive, a moment away)
      const xError = (await h.engine.processor(x, 'tok-x').then(
        () => undefined,
        (e: Error) => e,
      )) as Error;
      expect(xError).toBeInstanceOf(Error);
      expect(await probe(h, image)).toEqual({ kind: 'pending', jobId: 'r30c-x' });
      // y begins seeing the record: its success's release is awaited, the chain ends with x active
      const y = (await manual.getNextJob('tok-y')) as Job;
      const sent = (await h.engine.processor(y, 'tok-y')) as DispatchResult;
      expect(sent).toMatchObject({ dispatched: true });
      await y.moveToCompleted(sent, 'tok-y', false);
      // x's worker fails it now; the operator retries it (Bull Board's Retry)
      await x.moveToFailed(xError, 'tok-x', false);
      await (await h.engine.queue.getJob('r30c-x'))!.retry('failed');
      const { done } = watch(h.engine.createWorker());
      await waitFor(() => done.length === 1, 'the retried job ran', 15_000);
      expect(done[0]!.result).toMatchObject({ dispatched: true });
      expect(h.executor.callsFor(image)).toBe(3);
    } finally {
      await manual.close(true);
    }
  }, 30_000);
});
