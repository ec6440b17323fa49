import type { StageRef } from '../../../src';
import { harness } from '../../helpers/engine';
import { clearOutcome, clearRecordFailsAfterRunning, deferredWithWorker, refuseButRun } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';

/**
 * A batch whose only wake-up's promotion was refused (both tries), but which ran
 * anyway before the batch's CLEAR (its own timer, an operator's Promote) and counted itself:
 * Say it is reported cleared, not refused. With nothing promoted, clear.ts swallows
 * any failure of the batch's CLEAR as `[0]`, "a slot migrating refuses both": but a CLEAR that
 * ran and whose reply was lost for good (ioredis' commandTimeout, maxRetriesPerRequest after the
 * EXEC was written, a replica wait that fails after the write) did its work (took the count,
 * deleted it, kept its answer under sd:clr:<nonce>) and the clear never reads that answer: the
 * stage whose deferral ended is reported not cleared (cleared 0, notCleared 1), the count lost.
 */
const a: StageRef = { scope: ['r47-lost', 'ch-1'], stage: 'image' };

it('C10: a refused-only batch whose CLEAR ran but whose reply was lost reports the stage its run cleared as cleared, not as refused', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  const { wakeUp: wa, worker, done } = await deferredWithWorker(h, a);
  const refusal = refuseButRun(h.engine.queue, wa, done);
  // the batch's CLEAR runs on Redis, its reply is lost (a timeout)
  const lost = await clearRecordFailsAfterRunning(h.engine.queue, () => new Error('Command timed out'));
  let outcome: number | { cleared: number; notCleared: number } | undefined;
  try {
    outcome = await clearOutcome(h.engine, ['r47-lost']);
  } finally {
    refusal.restore();
    lost.restore();
    await worker.close();
  }
  expect(lost.failed()).toBe(1);
  // a's run deferred again as the first of a fresh chain
  expect(await listedDeferral(h.engine, a)).toMatchObject({ deferrals: 1 });
  // a's run ended its deferral for this clear (a fresh chain): it is cleared, as when the reply
  // arrives. Head: ClearIncompleteError { cleared: 0, notCleared: 1 }
  expect(outcome).toBe(1);
}, 30_000);
