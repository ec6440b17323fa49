import { stageId, type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { redisNow } from '../../helpers/observe';
import { waitFor } from '../../helpers/redis';

/** The slimmer wake-up: no `wakeUp`/`until` in its data, no `timestamp` in its options. */
const NO = notSent('no_worker_available');

describe('C15: the slimmer wake-up', () => {
  it("the delayed score, the job's timestamp + delay and the window's end listDeferred answers agree (Bull Board's will-run-at); the id reads stage path, class and chain counts", async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    const ref: StageRef = { scope: ['t'], stage: 'image' };
    h.executor.script(ref, NO);
    await h.engine.dispatchStage(ref, {});
    const [d] = await h.engine.listDeferred();
    const job = (await h.engine.queue.getJob(d!.wakeUpJobId))!;
    const until = d!.until;
    // README, "Bull Board": the id reads `<stage path>@<class>.<capacity>.<idempotent>.<failures>.…`
    const reads = `${stageId(ref)}@cap.1.0.0.`;
    expect(job.id!.slice(0, reads.length)).toBe(reads);
    expect(job.timestamp + job.delay).toBe(until);
    expect(job.delay).toBe(300_000);
    expect(job.opts).not.toHaveProperty('timestamp');
    expect(job.data).not.toHaveProperty('wakeUp');
    expect(job.data).not.toHaveProperty('until');
    // BullMQ's delayed score: (timestamp + delay) × 4096 plus a counter below 4096
    const score = Number(await h.redis.zscore(`${h.prefix}:${h.queueName}:delayed`, job.id!));
    expect(Math.floor(score / 0x1000)).toBe(until);
    // the timestamp is Redis' clock (to the engine's measured offset), not far from the marker's end
    const now = await redisNow(h.redis);
    const pttl = await h.redis.pttl(h.engine.deferredStageKey(ref));
    expect(Math.abs(now + pttl - until)).toBeLessThan(100);
  });

  it("a wake-up written by an earlier version (data with wakeUp and until) still runs as its stage's wake-up", async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    const ref: StageRef = { scope: ['old'], stage: 'image' };
    h.executor.script(ref, NO, SENT);
    await h.engine.dispatchStage(ref, {});
    const [d] = await h.engine.listDeferred();
    const key = `${h.prefix}:${h.queueName}:${d!.wakeUpJobId}`;
    const data = JSON.parse((await h.redis.hget(key, 'data'))!);
    await h.redis.hset(key, 'data', JSON.stringify({ ...data, wakeUp: true, until: new Date(d!.until).toISOString() }));
    const [listed] = await h.engine.listDeferred();
    expect(listed).toMatchObject({ reason: 'no_worker_available', class: 'capacity', deferrals: 1 });
    const woken: unknown[] = [];
    h.engine.on('woken', (e) => woken.push(e));
    h.engine.createWorker();
    // promoted (Bull Board's Promote): its run reports `woken` only as a wake-up
    await (await h.engine.queue.getJob(d!.wakeUpJobId))!.promote();
    await waitFor(() => (h.executor.callsFor(ref) === 2 ? true : undefined), 'the wake-up dispatch');
    await waitFor(async () => {
      const c = await h.engine.queue.getJobCounts('delayed', 'wait', 'active');
      return c.delayed === 0 && c.wait === 0 && c.active === 0;
    }, 'the queue to be empty');
    expect(woken).toEqual([{ ref, jobId: d!.wakeUpJobId }]);
    expect(await h.engine.listDeferred()).toEqual([]);
  });

  it('a removed wake-up re-added by hand with its id and data (queue.add) runs as the wake-up it was: the stage dispatches once', async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    const ref: StageRef = { scope: ['again'], stage: 'image' };
    h.executor.script(ref, NO, SENT);
    await h.engine.dispatchStage(ref, {});
    const [d] = await h.engine.listDeferred();
    const job = (await h.engine.queue.getJob(d!.wakeUpJobId))!;
    await job.remove();
    const results: unknown[] = [];
    const worker = h.engine.createWorker();
    worker.on('completed', (_j, r) => results.push(r));
    await h.engine.queue.add(job.name, job.data, { jobId: job.id });
    await waitFor(() => (results.length === 1 ? true : undefined), 'the re-added job to complete');
    expect(results[0]).toMatchObject({ dispatched: true });
    expect(h.executor.callsFor(ref)).toBe(2);
    expect(await h.engine.isStageDeferred(ref)).toBe(false);
  });
});
