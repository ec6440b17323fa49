import { Worker, type Job } from 'bullmq';
import type { DispatchResult, StageRef } from '../../src';
import type { harness } from './engine';
import { redisOptions } from './redis';

/**
 * opening: two jobs of `ref` added by hand, `<tag>x` and `<tag>y`, run by
 * BullMQ's manual processing (`getNextJob` + `engine.processor`). Job x's last failure (its
 * Worker's `backoffStrategy` says -1, "do not retry") releases its lock and, in the same turn,
 * job y begins: y's begin rides in the batch right behind x's release, so it sees no failed-job
 * record, and x's record is written while y runs. Returns once x's processor rejected and y
 * sent the stage; neither job is moved yet (the caller completes, fails or drops them).
 * The executor must answer x's call with an error and y's with a success.
 */
export async function failureBesideSuccess(
  h: ReturnType<typeof harness>,
  ref: StageRef,
  tag: string,
  lockDuration: number,
) {
  const data = { v: 1, scope: ref.scope, stage: ref.stage, payload: {} };
  await h.engine.queue.add(ref.stage, data, { jobId: `${tag}x`, attempts: 3, backoff: { type: 'mine', delay: 0 } });
  await h.engine.queue.add(ref.stage, data, { jobId: `${tag}y`, attempts: 3 });
  // (job y, fetched after the Worker is made: its strategy starts it)
  const held: { y?: Job } = {};
  let yRun: Promise<unknown> | undefined;
  const manual = new Worker(h.queueName, undefined, {
    connection: { ...redisOptions(), maxRetriesPerRequest: null },
    prefix: h.prefix,
    autorun: false,
    lockDuration,
    settings: {
      backoffStrategy: () =>
        new Promise<number>((resolve) => {
          setImmediate(() => {
            yRun ??= h.engine.processor(held.y!, 'tok-y');
          });
          resolve(-1);
        }),
    },
  });
  const x = (await manual.getNextJob('tok-x')) as Job;
  const y = (held.y = (await manual.getNextJob('tok-y')) as Job);
  const xError = (await h.engine.processor(x, 'tok-x').then(
    () => undefined,
    (e: Error) => e,
  )) as Error;
  const sent = (await yRun) as DispatchResult;
  return { manual, x, y, xError, sent, base: `${h.prefix}:${h.queueName}:` };
}
