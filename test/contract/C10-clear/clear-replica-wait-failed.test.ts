import type { StageRef } from '../../../src';
import { harness, notSent } from '../../helpers/engine';
import { stageView } from '../../helpers/observe';
import { stubWait } from '../../helpers/replica-wait';

/**
 * A batch call that ran but whose replica wait failed (its own pipeline rejects: its connection
 * closed under it, a commandTimeout on the WAIT) rejects with `ReplicationUnconfirmedError`, as
 * every write of the engine does then, not resolves with a count the replicas may not hold.
 */
const a: StageRef = { scope: ['r49-wait-failed', 'ch-1'], stage: 'image' };

it('C10: a batch call that ran but whose replica WAIT failed rejects with REPLICATION_UNCONFIRMED, not resolves with the count', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 }, waitForReplicas: { replicas: 1, timeoutMs: 10 } });
  // the tests' Redis has no replica: its WAIT is answered as one replica holding the write
  const w = await stubWait(h.engine.queue);
  h.executor.script(a, notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
  let outcome: unknown;
  try {
    // every WAIT's connection closes before its reply (the write itself ran)
    w.fail(Number.POSITIVE_INFINITY);
    outcome = await h.engine.clearDeferrals(['r49-wait-failed']).then(
      (n) => ({ resolved: n }),
      (e: Error & { code?: string }) => ({ rejected: e.code ?? e.message }),
    );
  } finally {
    w.restore();
  }
  expect(w.failed()).toBe(1);
  // the call ran on the primary (the deferral ended: nothing holds the stage but its wake-up,
  // which runs at its time) ...
  const { jobs, ...view } = await stageView(h.engine, a);
  expect(view).toEqual({ deferred: false, listed: undefined });
  expect(jobs).toHaveLength(1);
  // ... but its replica wait failed: the clear reports it unconfirmed
  expect(outcome).toEqual({ rejected: 'REPLICATION_UNCONFIRMED' });
});
