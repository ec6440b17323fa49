import type { StageRef } from '../../../src';
import { expectWindowLeft, harness, notSent, SENT } from '../../helpers/engine';
import { fast, heldExecutor } from '../../helpers/jobs';
import { chainStartOf } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

/**
 * The ladder and the chain start across a real failure retried by BullMQ mid-chain, a
 * retryAfterMs step and an early wake: the chain start (wakeDeferred's order, read through
 * chainStartOf) is kept across the failure, the hinted deferral leaves the line (wakeDeferred
 * never wakes it) and the next plain one joins it again, and the entry goes with the success;
 * and a wake whose `limit` is spent on other stages still shortens an in-flight attempt's
 * deferral, as the README says.
 */
const ref: StageRef = { scope: ['book-1', 'ch'], stage: 'image' };
const NO = notSent('no_worker_available');

describe('C4: the capacity ladder', () => {
  it('windows 200, 400 ms, a real failure retried (no step), a hint (1 s, counted), 1600, 3200 ms, an early wake; chain start kept, the hint out of the line; success drops it', async () => {
    const h = harness({
      windows: { capacitySeconds: 0.2, capacityMaxSeconds: 10, jitter: 0 },
      retry: { attempts: 3, backoff: fast },
    });
    h.executor.script(
      ref,
      NO,
      NO,
      notSent('send_failed'),
      notSent('no_worker_available', { retryAfterMs: 1000 }),
      NO,
      NO,
      SENT,
    );
    const seen: { deferrals: number; delay: number; score: string | null }[] = [];
    let woke = false;
    h.engine.on('deferred', (e) => {
      void (async () => {
        const job = await h.engine.queue.getJob(e.wakeUpJobId);
        seen.push({
          deferrals: e.deferrals,
          delay: job!.opts.delay!,
          score: await chainStartOf(h.redis, h, ref),
        });
        // after the 4th deferral (1600 ms), capacity returns early once
        if (e.deferrals === 5 && !woke) {
          woke = true;
          expect((await h.engine.wakeDeferred({ stage: 'image' })).woken).toEqual([ref]);
        }
      })();
    });
    const done: unknown[] = [];
    expect((await h.engine.enqueue(ref, {})).added).toBe(true);
    const worker = h.engine.createWorker();
    worker.on('completed', (_j, r) => done.push(r));
    await waitFor(
      () => done.some((r) => (r as { dispatched?: boolean }).dispatched === true),
      'the stage sent',
      30_000,
    );
    expect(seen.map((s) => [s.deferrals, s.delay])).toEqual([
      [1, 200],
      [2, 400],
      [3, 1000],
      [4, 1600],
      [5, 3200],
    ]);
    const [s1, s2, s3, s4, s5] = seen.map((s) => s.score);
    expect(s1).not.toBeNull();
    expect([s2, s3, s4, s5]).toEqual([s1, null, s4, s4]);
    expect(s4).not.toBeNull();
    expect(await chainStartOf(h.redis, h, ref)).toBeNull();
    expect(h.executor.calls).toHaveLength(7);
    await worker.close();
  });

  it('a wake whose limit 1 goes to another stage still makes the in-flight attempt short (README: the signal is not lost)', async () => {
    const held = heldExecutor(NO);
    const other: StageRef = { scope: ['book-2', 'ch'], stage: 'image' };
    let first = true;
    const h = harness({
      windows: { capacitySeconds: 60, jitter: 0 },
      inFlightRetryMs: 3000,
      executor: async (r) => {
        if (r.scope[0] === 'book-2') return NO;
        if (first) {
          first = false;
          return held.executor();
        }
        return NO;
      },
    });
    await h.engine.dispatchStage(other, {});
    const attempt = h.engine.dispatchStage(ref, {});
    await held.running;
    expect((await h.engine.wakeDeferred({ stage: 'image', limit: 1 })).woken).toEqual([other]);
    held.release();
    await attempt;
    expectWindowLeft(await h.redis.pttl(h.engine.deferredStageKey(ref)), 3000);
  });
});
