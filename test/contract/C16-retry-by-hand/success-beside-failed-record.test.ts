import { harness, SENT } from '../../helpers/engine';
import { failureBesideSuccess } from '../../helpers/race';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * A job's last failure releases its lock first and writes its failed-job record after
 * (`FAIL`); a dispatch of the stage by another job that begins in between sees no record and
 * sends the stage. The failing job's worker then dies before BullMQ fails it: BullMQ redelivers
 * the job. The success's release (the chain's end) must supersede the record's job, so the stage
 * is sent once. The interleaving is made deterministic with the Worker's own
 * `settings.backoffStrategy` (a custom backoff type: docs/producers.md): it answers -1 ("do not
 * retry") and, in the same turn, the other job's run starts, so its begin rides in the batch
 * right behind the failure's release. The dying worker is BullMQ's manual processing
 * (`getNextJob` + `engine.processor`), which then never moves the failed job, as a killed
 * process would not.
 */
const image: StageRef = { scope: ['book-28', 'ch-1', 'sc-1'], stage: 'image' };

describe('C16: a success and a failed-job record written during it', () => {
  it('a stage is sent once when a job fails for good while another job of the stage begins, and the failing worker dies before BullMQ fails the job', async () => {
    const h = harness();
    h.executor.script(image, new Error('downstream 503'), SENT, SENT);
    const { manual: dying, x, y, xError, sent } = await failureBesideSuccess(h, image, 'r28-', 1000);
    try {
      expect([x.id, y.id]).toEqual(['r28-x', 'r28-y']);
      // job x: its last failure (the strategy said -1): recorded, then BullMQ would fail it...
      expect(xError?.message).toBe('downstream 503');
      // ...job y sent the stage, and its worker completes it
      expect(sent).toMatchObject({ dispatched: true });
      await y.moveToCompleted(sent, 'tok-y', false);
      // the worker dies before BullMQ fails x (x stays active; its record and finish mark are written)
      expect(await h.engine.queue.getJobState('r28-x')).toBe('active');

      // another worker's stalled check redelivers x
      const { done } = watch(h.engine.createWorker({ stalledInterval: 300 }));
      await waitFor(() => done.length === 1, 'the redelivered job ran', 15_000);
      const sends = h.executor.callsOf(image).filter((c) => c.result?.dispatched).length;
      expect({ sends, redelivery: done[0]!.result }).toMatchObject({
        sends: 1,
        redelivery: { dispatched: false, reason: 'superseded' },
      });
    } finally {
      await dying.close(true);
    }
  }, 30_000);
});
