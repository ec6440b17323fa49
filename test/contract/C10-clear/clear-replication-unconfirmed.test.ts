import type { StageRef } from '../../../src';
import { ReplicationUnconfirmedError } from '../../../src/errors';
import { harness, notSent } from '../../helpers/engine';
import { clearRecordFailsAfterRunning } from '../../helpers/jobs';
import { listedDeferral } from '../../helpers/observe';

/**
 * a fix reads a failed batch record's kept answer back (it may have run), but not after
 * a replica wait went unconfirmed: the record ran on the primary, the replicas may not hold it,
 * and the clear says so as every write of the engine does then (the caller clears again).
 */
const a: StageRef = { scope: ['r48-unconfirmed', 'ch-1'], stage: 'image' };

it('C10: a batch record that ran but whose replica wait went unconfirmed rejects with REPLICATION_UNCONFIRMED, though it ended the deferral', async () => {
  const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
  h.executor.script(a, notSent('no_worker_available'));
  expect(await h.engine.dispatchStage(a, {})).toMatchObject({ reason: 'no_worker_available' });
  const unconfirmed = await clearRecordFailsAfterRunning(
    h.engine.queue,
    () => new ReplicationUnconfirmedError('clear'),
  );
  let outcome: unknown;
  try {
    outcome = await h.engine.clearDeferrals(['r48-unconfirmed']).catch((e: { code?: string }) => e.code);
  } finally {
    unconfirmed.restore();
  }
  expect(unconfirmed.failed()).toBe(1);
  // the record ran (the deferral ended), and the clear reports it unconfirmed
  expect(await h.engine.isStageDeferred(a)).toBe(false);
  expect(await listedDeferral(h.engine, a)).toBeUndefined();
  expect(outcome).toBe('REPLICATION_UNCONFIRMED');
});
