import type { JobsOptions, Queue } from 'bullmq';
import { readyJobId } from '../../src/job-data';
import { stageId } from '../../src/stage-ref';
import type { StageRef } from '../../src';

/**
 * Adds a producer's dispatch job for `ref` as the published contract says (id `<sid>@r.…`,
 * deduplication id the stage id), with `opts` beside them (attempts, 3 unless given, backoff, removeOnComplete…).
 * BullMQ deduplicates it while the stage has a job pending: the answer is then that job.
 */
export function addProducerJob(queue: Queue, ref: StageRef, opts: JobsOptions = {}, payload: unknown = {}) {
  const sid = stageId(ref);
  return queue.add(
    ref.stage,
    { v: 1, scope: [...ref.scope], stage: ref.stage, payload },
    { attempts: 3, ...opts, jobId: readyJobId(sid), deduplication: { id: sid } },
  );
}
