import { harness, SENT } from '../../helpers/engine';
import { failureBesideSuccess } from '../../helpers/race';
import { waitFor } from '../../helpers/redis';
import { watch } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Path: the chain-end rule (src/lua/scripts.ts, `release`, mode '1', the
 * `?` loop): "a job failed for good that is not finished runs again: redelivered (its worker
 * died before BullMQ failed it ...). The stage went out meanwhile, so it is superseded". That
 * loop runs only in an AWAITED release. A success whose begin saw no licence and no failed-job
 * record is released lazily (`lazyRelease`, deferral-store.ts `beginOutcome`; release mode 'z'
 * only deletes the lock and runs `handedOn`), on the assumption that nothing can appear while the
 * attempt runs. But a failed-job record needs no lock: a job's last failure releases its lock
 * first (`unsent`, 'plain') and writes its record after (`FAIL`, processor.ts `failForGood`).
 * A dispatch that begins in between (here: in the very BATCH that carries the failure's
 * release) sees no record, sends the stage, and releases lazily: the record that appeared
 * meanwhile is never looked at. The failing job's worker then dies before BullMQ fails it
 * (a deploy, an OOM kill): BullMQ redelivers the job, its begin reads it as a redelivery (its
 * stalled count grew past `sdt`), not superseded, and it sends the stage a second time.
 *
 * Expected (README, operator table: "A job whose worker died after the engine recorded its
 * finish, before BullMQ finished it, is no retry: its redelivery runs once more on its old budget
 * (and sends nothing when the stage went out meanwhile)"; docs/design.md: "a chain's end marks
 * superseded the jobs of the records left (`?`) that BullMQ has not failed"): the redelivered
 * job completes as superseded, the stage is sent once. What happens: sent twice.
 *
 * The interleaving is made deterministic with the Worker's own `settings.backoffStrategy` (a
 * job added by hand with a custom backoff type: docs/producers.md): it answers -1 ("do not
 * retry") and, in the same turn, the other job's run starts, so its begin rides in the batch
 * right behind the failure's release. The dying worker is BullMQ's manual processing
 * (`getNextJob` + `engine.processor`), which then never moves the failed job, as a killed
 * process would not.
 */
const image: StageRef = { scope: ['book-28', 'ch-1', 'sc-1'], stage: 'image' };

describe('C16: a lazily released success and a failed-job record written during it', () => {
  it('a stage is sent once (it was sent twice) when a job fails for good while another job of the stage begins, and the failing worker dies before BullMQ fails the job', async () => {
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
