import { addDeduplicated } from './adapter';
import type { DeferralStore } from '../deferral-store';
import type { Dispatcher } from '../dispatch';
import { checkCall, checkPayload } from '../payload';
import { dispatchJobData, readyJobId } from '../job-data';
import { InvalidOptionsError } from '../errors';
import { stageId } from '../stage-ref';
import type { EnqueueResult, StageRef } from '../types';

/**
 * Adds a dispatch job for a stage unless it has one waiting, running or
 * deferred. One round trip (the probe) answers for a stage that has one; a
 * deferred stage costs no write (a `replace` two more round trips: `replacePayload`).
 * Concurrent enqueues of one stage meet at BullMQ's deduplication key
 * `de:<stageId>`, held by the stage's job until it finishes. With
 * `waitForReplicas`, a job added or a payload replaced returns once the replicas hold it.
 */
export async function enqueueStage<P>(
  store: DeferralStore,
  dispatcher: Dispatcher<P>,
  ref: StageRef,
  payload: P,
  call: { buildId?: string; replace?: boolean },
): Promise<EnqueueResult> {
  const sid = stageId(ref);
  checkPayload(payload);
  checkCall(call);
  if (call.replace !== undefined && typeof call.replace !== 'boolean')
    throw new InvalidOptionsError(`Expected \`replace\` to be a boolean, got ${typeof call.replace}`);
  const probe = await store.probe(sid);
  // with `replace`, the newest payload wins for the stage's job that has not begun (with
  // `waitForReplicas`, confirmed as an add is: the write was made on the probe's connection)
  const taken = async (jobId: string | undefined) => {
    if (call.replace !== true || !(await store.replacePayload(sid, jobId, payload, call.buildId))) return false;
    await store.replicated('enqueue', probe.connection);
    return true;
  };
  // (on Redis' clock, as the deferral's own `until`)
  if (probe.kind === 'deferred')
    return {
      added: false,
      reason: 'deferred',
      until: store.redisNow() + probe.remainingMs,
      payloadTaken: await taken(undefined),
    };
  if (probe.kind === 'in_flight') return { added: false, reason: 'dispatch_in_flight', payloadTaken: false };
  // the stage's licensed job, or a job that failed for good and was retried by hand
  if (probe.kind === 'pending')
    return { added: false, reason: 'pending', jobId: probe.jobId, payloadTaken: await taken(probe.jobId) };
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
  const payloadTaken = added || (await taken(job.id as string));
  return { added, reason: added ? null : 'pending', jobId: job.id as string, payloadTaken };
}
