import type { Job } from 'bullmq';
import { createProcessor } from '../../src/bullmq/processor';
import { checkExecutorResult } from '../../src/answer';
import { dispatchJobData, readyJobId } from '../../src/job-data';
import { stageId } from '../../src/stage-ref';
import type { DispatchResult, StageRef } from '../../src';

/** The largest executor answer a job's return value keeps, as JSON characters (processor.ts). */
export const MAX_STORED_ANSWER = 1 << 20;

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/**
 * The job's return value for a dispatch whose executor answered `answer` (no Redis): the
 * processor driven by a fake dispatcher whose attempt returns the engine's copy of the answer
 * (`checkExecutorResult`), as `Dispatcher.attempt` does for a dispatch. `copied` says whether
 * the return value holds that copy itself or a new object (the JSON round trip).
 */
export async function stored(answer: unknown): Promise<{ rv: DispatchResult; copied: boolean }> {
  const { raw } = checkExecutorResult(answer);
  const result: DispatchResult = { dispatched: true, reason: null, retryable: false, result: raw };
  const dispatcher = {
    closed: false,
    attempt: async () => ({
      kind: 'dispatched',
      chain: { capacity: 0, idempotent: 0, failures: 0 },
      ownFailures: 0,
      result,
    }),
  };
  const store = { queue: { qualifiedName: 'bull:q' } };
  const opts = { inFlightRetryMs: 100, retry: { attempts: 3, backoff: { type: 'fixed', delay: 1 } } };
  const processor = createProcessor(dispatcher as never, store as never, opts as never);
  const sid = stageId(image);
  const job = {
    id: readyJobId(sid),
    data: dispatchJobData(image, {}, undefined),
    deduplicationId: sid,
    opts: { removeOnComplete: true, deduplication: { id: sid } },
    timestamp: 1,
    stalledCounter: 0,
    attemptsMade: 0,
    attemptsStarted: 1,
  } as unknown as Job;
  const rv = (await processor(job, 'token-1')) as DispatchResult;
  return { rv, copied: rv.result !== raw };
}

/** The job's return value for a dispatch whose executor answered `answer` (see `stored`). */
export async function returnValueFor(answer: unknown): Promise<DispatchResult> {
  return (await stored(answer)).rv;
}
