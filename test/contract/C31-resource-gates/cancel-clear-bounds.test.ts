import { DeferralLimitError, noCapacity, type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';
import { redisNow } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

const stage = (n: number): StageRef => ({ scope: ['book-c', `sc-${n}`], stage: 'image' });

describe('C31: a gated stage is a deferred stage', () => {
  it('cancel ends it: its wake-up goes, and the line skips it', async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    await h.engine.dispatchStage(stage(2), {});
    const c = await h.engine.cancelStage(stage(1));
    expect(c).toMatchObject({ hadDeferral: true, removedJobs: 1 });
    expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 5 })).woken).toEqual([stage(0), stage(2)]);
    expect(await h.redis.zrange(`${h.prefix}:${h.queueName}:sd:wq:@gpu`, '0', '-1')).toEqual([
      'book-c/sc-0/image',
      'book-c/sc-2/image',
    ]);
  });

  it('a clear runs it now with a fresh chain; while the gate stays closed it waits behind it again, calling nothing', async () => {
    const h = harness({ resourceOf: () => 'gpu', windows: { capacitySeconds: 60, jitter: 0 } });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await h.engine.dispatchStage(stage(1), {});
    const deferred: { ref: StageRef; reason: string; deferrals: number }[] = [];
    h.engine.on('deferred', (e) => deferred.push(e));
    const worker = h.engine.createWorker();
    try {
      expect(await h.engine.wakeScope(['book-c', 'sc-1'])).toBe(1);
      await waitFor(() => deferred.length === 1, 'the cleared stage to run');
      expect(deferred[0]).toMatchObject({ ref: stage(1), reason: 'gate_closed', deferrals: 1 });
      expect(h.executor.callsFor(stage(1))).toBe(0);
    } finally {
      await worker.close();
    }
  });

  it('gated deferrals count toward the capacity bound and spend no attempt', async () => {
    const h = harness({
      resourceOf: () => 'gpu',
      windows: { capacitySeconds: 60, jitter: 0 },
      limits: { maxCapacityDeferrals: 2, maxIdempotentDeferrals: 3 },
    });
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    const limits: unknown[] = [];
    h.engine.on('limit', (e) => limits.push(e));
    const failed: unknown[] = [];
    const worker = h.engine.createWorker();
    worker.on('failed', (_job, err) => failed.push(err));
    try {
      await h.engine.enqueue(stage(1), {});
      // each run finds the gate closed and parks again; an operator's Promote runs it at once
      for (let i = 1; i <= 2; i++) {
        const listed = await waitFor(async () => {
          const l = await h.engine.listDeferred(['book-c', 'sc-1']);
          return l[0]?.deferrals === i ? l : undefined;
        }, `gated deferral ${i}`);
        await (await h.engine.queue.getJob(listed[0]!.wakeUpJobId))!.promote();
      }
      await waitFor(() => failed.length === 1, 'the bound');
      expect(failed).toEqual([expect.any(DeferralLimitError)]);
      expect(limits).toEqual([expect.objectContaining({ ref: stage(1), class: 'capacity', reason: 'gate_closed' })]);
      expect(h.executor.callsFor(stage(1))).toBe(0);
    } finally {
      await worker.close();
    }
  });
});

describe('C31: a gated chain that failed for good', () => {
  it('leaves the line at its next wake, though BullMQ keeps its failed job', async () => {
    const h = harness({
      resourceOf: () => 'gpu',
      windows: { capacitySeconds: 60, jitter: 0 },
      limits: { maxCapacityDeferrals: 1, maxIdempotentDeferrals: 3 },
    });
    const line = `${h.prefix}:${h.queueName}:sd:wq:@gpu`;
    h.executor.script(stage(0), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    const failed: unknown[] = [];
    const worker = h.engine.createWorker();
    worker.on('failed', (_job, err) => failed.push(err));
    try {
      await h.engine.enqueue(stage(1), {});
      const [parked] = await waitFor(async () => {
        const l = await h.engine.listDeferred(['book-c', 'sc-1']);
        return l.length === 1 ? l : undefined;
      }, 'the gated deferral');
      // its wake-up, promoted, parks again: past the bound, the job fails for good (and is kept)
      await (await h.engine.queue.getJob(parked!.wakeUpJobId))!.promote();
      await waitFor(() => failed.length === 1, 'the bound');
      expect(failed).toEqual([expect.any(DeferralLimitError)]);
      expect(await h.engine.queue.getFailedCount()).toBe(1);
      // (no worker from here: stage 0's wake-up, promoted by the wake, must not run and end its chain)
      await worker.close();
      expect((await h.engine.wakeDeferred({ resource: 'gpu', limit: 5 })).woken).toEqual([stage(0)]);
      // its chain ended: nothing of it waits in the line (the line lives on while deferrals join it)
      expect(await h.redis.zrange(line, '0', '-1')).toEqual(['book-c/sc-0/image']);
    } finally {
      await worker.close();
    }
  });
});

describe('C31: a probe whose capacity answer reaches the capacity bound', () => {
  it('still closes the gate for the answer’s window: the next dispatch, after the probe’s lease, is gated', async () => {
    const h = harness({
      resourceOf: () => 'gpu',
      lockMs: 1000,
      windows: { capacitySeconds: 60, jitter: 0 },
      limits: { maxCapacityDeferrals: 1, maxIdempotentDeferrals: 3 },
    });
    const gate = `${h.prefix}:${h.queueName}:sd:gate:gpu`;
    // stage 0 closes the gate for 300 ms (its hint), its one capacity deferral
    h.executor.script(stage(0), noCapacity({ retryAfterMs: 300 }), noCapacity());
    await h.engine.dispatchStage(stage(0), {});
    await waitFor(async () => Number(await h.redis.get(gate)) <= (await redisNow(h.redis)), 'the window to end');
    // its next dispatch probes: no capacity, and past its bound
    const probedAt = await redisNow(h.redis);
    const closed: unknown[] = [];
    h.engine.on('gateClosed', (e) => closed.push(e));
    expect(await h.engine.dispatchStage(stage(0), {})).toMatchObject({ reason: 'no_capacity', limitReached: true });
    expect(closed).toEqual([expect.objectContaining({ resource: 'gpu', ref: stage(0), reason: 'no_capacity' })]);
    // the probe's lease (lockMs) is over; the answer's window (60 s) is not
    await waitFor(async () => (await redisNow(h.redis)) > probedAt + 1000, 'the lease to end');
    expect(await h.engine.dispatchStage(stage(1), {})).toMatchObject({ reason: 'gate_closed' });
    expect(h.executor.callsFor(stage(1))).toBe(0);
  });
});
