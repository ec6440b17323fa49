import { addDeduplicated } from './adapter';
import type { DeferralStore } from '../deferral-store';
import { checkCall, checkPayload, type Dispatcher } from '../dispatch';
import { dispatchJobData, readyJobId } from '../job-data';
import { stageId } from '../stage-ref';
import type { EnqueueResult, StageRef } from '../types';

/**
 * Adds a dispatch job for a stage unless it has one waiting, running or
 * deferred. One round trip (the probe) answers for a stage that has one; a
 * deferred stage costs no write.
 * Concurrent enqueues of one stage meet at BullMQ's deduplication key
 * `de:<stageId>`, held by the stage's job until it finishes. With
 * `waitForReplicas`, a job added returns once the replicas hold it.
 */
export async function enqueueStage<P>(
  store: DeferralStore,
  dispatcher: Dispatcher<P>,
  ref: StageRef,
  payload: P,
  call: { buildId?: string },
): Promise<EnqueueResult> {
  const sid = stageId(ref);
  checkPayload(payload);
  checkCall(call);
  const probe = await store.probe(sid);
  // (on Redis' clock, as the deferral's own `until`)
  if (probe.kind === 'deferred')
    return { added: false, reason: 'deferred', until: store.redisNow() + probe.remainingMs };
  if (probe.kind === 'in_flight') return { added: false, reason: 'dispatch_in_flight' };
  // the stage's licensed job, or a job that failed for good and was retried by hand
  if (probe.kind === 'pending') return { added: false, reason: 'pending', jobId: probe.jobId };
  const data = dispatchJobData(ref, payload, call.buildId);
  const jobId = readyJobId(sid);
  const job = await addDeduplicated(
    store.queue,
    ref.stage,
    data,
    dispatcher.jobOptions({ jobId, deduplication: { id: sid } }),
  );
  const added = job.id === jobId;
  if (added) await store.replicated('enqueue', probe.connection);
  return { added, reason: added ? null : 'pending', jobId: job.id as string };
}
