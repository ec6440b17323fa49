import { harness, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { fast, watch } from '../../helpers/jobs';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * Hostile review of the 0.2 core (retry budget is BullMQ's own).
 * docs/producers.md, "Job options": `attempts` is "a positive integer; the engine's
 * `retry.attempts` (default 3)", `backoff` BullMQ's; contract C11: "real failures spend the
 * job's `attempts` (with BullMQ's backoff, or a custom backoff strategy asked once per failure)".
 */
const image: StageRef = { scope: ['hostile', 'budget'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C11: a producer job and its budget', () => {
  it("C11: a producer job added without `attempts` (as another language's producer leaves it out) gets the engine's retry.attempts: its first real failure is retried", async () => {
    const h = harness({ retry: { attempts: 3, backoff: fast } });
    h.executor.script(image, new Error('down 1'), SENT);
    const sid = stageId(image);
    // BullMQ's Job defaults attempts to 0 by Object.assign: an explicit undefined stores opts without it,
    // as a producer in another language writes them
    const job = await h.engine.queue.add('image', data, {
      jobId: readyJobId(sid),
      deduplication: { id: sid },
      attempts: undefined,
    });
    const opts = JSON.parse((await h.redis.hget(`${h.prefix}:${h.queueName}:${job.id}`, 'opts'))!) as object;
    expect(opts).not.toHaveProperty('attempts');
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length + failed.length > 0, 'the job finished', 10_000);
    await waitFor(
      async () => ['completed', 'failed', 'unknown'].includes(await h.engine.queue.getJobState(job.id!)),
      'settled',
      10_000,
    );
    expect({ failed: failed.map((f) => f.error.message), calls: h.executor.callsFor(image) }).toEqual({
      failed: [],
      calls: 2,
    });
    expect(done[0]?.result).toMatchObject({ dispatched: true });
  }, 20_000);

  it("C11: a producer job with a custom backoff type is retried after the Worker's backoffStrategy delay (the strategy is asked once per failure)", async () => {
    const h = harness({ retry: { attempts: 3, backoff: fast } });
    h.executor.script(image, new Error('down 1'), SENT);
    const sid = stageId(image);
    const asked: number[] = [];
    const job = await h.engine.queue.add('image', data, {
      jobId: readyJobId(sid),
      deduplication: { id: sid },
      attempts: 3,
      backoff: { type: 'mine', delay: 10 } as never,
    });
    const { done, failed } = watch(
      h.engine.createWorker({
        settings: {
          backoffStrategy: (attemptsMade: number) => {
            asked.push(attemptsMade);
            return 50;
          },
        },
      }),
    );
    await waitFor(() => done.length + failed.length > 0, 'the job finished', 10_000);
    expect({ failed: failed.map((f) => (f.error as { code?: string }).code ?? f.error.message), asked }).toEqual({
      failed: [],
      asked: [1],
    });
    expect(done[0]?.result).toMatchObject({ dispatched: true });
    expect(job.id).toBeDefined();
  }, 20_000);
});
