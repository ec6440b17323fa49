import { harness, SENT } from '../../helpers/engine';
import { watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A BullMQ user ticks a stage with a job scheduler (`queue.upsertJobScheduler`) instead of a
 * host loop calling `enqueue`: every N ms a job `repeat:<scheduler id>:<millis>` carries the
 * stage. Its id is none of the published forms (docs/producers.md): it is refused, not dispatched.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe('C17: a job scheduler producing dispatch jobs for one stage', () => {
  it('each tick fails at once with INVALID_JOB_OPTIONS, never dispatched; an enqueue of the stage still adds and dispatches it', async () => {
    const h = harness();
    h.executor.fallback = SENT;
    const worker = h.engine.createWorker({ concurrency: 4 });
    const { done, failed } = watch(worker);
    await h.engine.queue.upsertJobScheduler(
      'tick-image',
      { every: 200 },
      { name: 'image', data, opts: { attempts: 3 } },
    );
    await waitFor(() => failed.length >= 2, 'two ticks failed', 5000);
    await h.engine.queue.removeJobScheduler('tick-image');
    for (const f of failed) {
      expect(f.id).toMatch(/^repeat:tick-image:\d+$/);
      expect(f.error).toMatchObject({ code: 'INVALID_JOB_OPTIONS' });
      expect(String(f.error)).toMatch(/job scheduler's tick, no dispatch job: schedule a job on a queue of your own/);
      expect(await h.engine.queue.getJobState(f.id)).toBe('failed');
    }
    expect(h.executor.calls).toHaveLength(0);
    // nothing was recorded for them: the stage is free for a producer's job
    expect(await h.engine.enqueue(image, {})).toMatchObject({ added: true });
    await waitFor(() => done.some((d) => d.result.dispatched === true), 'the enqueued job dispatched');
    expect(h.executor.calls).toHaveLength(1);
  });
});
