import type { Job, JobsOptions, Queue } from 'bullmq';
import type { StageRef } from '../../src';
import { dispatchJobData, readyJobId } from '../../src/job-data';
import { stageId } from '../../src/stage-ref';

/**
 * Adds a job of stage `ref` as a producer does by the published contract (docs/producers.md):
 * id `<stageId>@r.…`, deduplication id the stage id, with BullMQ options of the test's own
 * (attempts, 3 unless given; backoff, removeOnComplete…). BullMQ deduplicates it while the stage has a job.
 */
export function addProducerJob(
  queue: Queue,
  ref: StageRef,
  opts: JobsOptions = {},
  payload: unknown = {},
  name: string = ref.stage,
): Promise<Job> {
  const sid = stageId(ref);
  return queue.add(name, dispatchJobData(ref, payload, undefined), {
    jobId: readyJobId(sid),
    deduplication: { id: sid },
    attempts: 3,
    ...opts,
  });
}
