import { harness, notSent, SENT } from '../../helpers/engine';
import { fetchBy, latch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';
import type { StageRef } from '../../../src';

/**
 * A worker whose clock runs ahead of Redis' (by up to maxClockSkewMs, design.md
 * "Clocks") promotes a wake-up W before its window ends: W's begin finds its own
 * marker with that little left and answers `early`; the processor then re-delays W for the rest
 * (`job.moveToDelayed`). wakeDeferred lands between that begin and the move: WAKE finds the marker
 * and W's hash, deletes the marker and reports the stage woken; its promote of W fails ("not in
 * the delayed state": W is active) and is swallowed. The processor then moves W back to delayed
 * for the whole rest of its old window. Contract (): "its wake-up job runs now"; what
 * happens: the stage wakeDeferred reported woken waits out its old window (up to
 * maxClockSkewMs), the freed slot unused.
 * The test makes "early" with maxClockSkewMs 10 s and an 8 s window, W promoted as the fast
 * host's worker would, and holds the processor's move with a latch while wakeDeferred runs.
 */
const a: StageRef = { scope: ['r32-early', 'ch-1'], stage: 'image' };

describe('C8: wakeDeferred while a wake-up promoted early by a clock is being re-delayed', () => {
  it('a stage woken while its early-promoted wake-up is being re-delayed runs now, not at its old due time', async () => {
    const h = harness({ windows: { capacitySeconds: 8, jitter: 0 }, maxClockSkewMs: 10_000 });
    h.executor.script(a, notSent('no_worker_available'), SENT);
    await h.engine.dispatchStage(a, {});
    const [d] = await h.engine.listDeferred();
    const w = (await h.engine.queue.getJob(d!.wakeUpJobId))!;
    // a worker ahead of Redis' clock moves W to wait before its window ends
    await w.promote();
    const token = 'r32-early-token';
    const job = await fetchBy(h, token);
    expect(job.id).toBe(d!.wakeUpJobId);
    const moving = latch();
    const go = latch();
    const move = job.moveToDelayed.bind(job);
    job.moveToDelayed = async (ts: number, t?: string) => {
      moving.open();
      await go.opened;
      return move(ts, t);
    };
    const run = Promise.resolve(h.engine.processor(job, token)).catch((e: unknown) => e);
    await moving.opened; // begin answered early; the re-delay is under way
    expect((await h.engine.wakeDeferred({ stage: 'image' })).woken).toEqual([a]);
    expect(await h.engine.isStageDeferred(a)).toBe(false);
    go.open();
    await run;
    // not held back in delayed for the rest of the old window
    expect(await h.engine.queue.getJobState(job.id!)).not.toBe('delayed');
    const worker = h.engine.createWorker();
    try {
      // woken: its wake-up runs now (well before the old window's end, ~8 s away)
      await waitFor(() => h.executor.calls.length === 2, 'the woken wake-up dispatched', 3000);
      expect(h.executor.calls[1]!.result).toMatchObject({ dispatched: true });
    } finally {
      await worker.close();
    }
  }, 20_000);
});
