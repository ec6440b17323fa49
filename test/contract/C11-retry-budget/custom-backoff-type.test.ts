import { harness, SENT } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { fast, watch } from '../../helpers/jobs';
import { stageId, type StageRef } from '../../../src';
import { readyJobId } from '../../../src/job-data';

/**
 * docs/producers.md, "Job options": a producer's `backoff` may be a custom type its Workers'
 * `settings.backoffStrategy` knows; BullMQ applies it between real failures.
 */
const image: StageRef = { scope: ['budget', 'custom'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C11: a producer job and its budget', () => {
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
    await waitFor(() => done.length > 0, 'the job completed', 10_000);
    // (BullMQ's Worker reports each failed attempt, the retried one too)
    expect({ failed: failed.map((f) => f.error.message), asked }).toEqual({ failed: ['down 1'], asked: [1] });
    expect(done[0]?.result).toMatchObject({ dispatched: true });
    expect(job.id).toBeDefined();
  }, 20_000);
});
