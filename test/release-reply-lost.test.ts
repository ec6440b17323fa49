import type { Job } from 'bullmq';
import { redisClient } from '../src/bullmq/adapter';
import { CMD } from '../src/store/client';
import { harness, SENT } from './helpers/engine';

/**
 * docs/design.md, "Why no stage is lost", row "success released": a stage
 * the executor sent is never sent again because its release's reply was lost
 * (ioredis' `commandTimeout`, a connection reset after the write, a failover
 * mid-call). Found by review 13: the attempt threw, BullMQ retried the job and
 * the retry sent the stage a second time, with no process crashed. The
 * release is awaited (not lazy) when the stage has a licence or failed-job
 * records, or for a direct call.
 */
const ref = { scope: ['book-r13', 'ch-1'], stage: 'image' };

type Send = (...args: unknown[]) => Promise<unknown>;

/** Wraps the engine's `BATCH` command: `fault(args, reply)` may throw instead of handing the reply back. */
async function interceptBatch(
  h: ReturnType<typeof harness>,
  fault: (args: unknown[]) => boolean,
): Promise<{ faults: () => number }> {
  await h.engine.waitUntilReady();
  const c = (await redisClient(h.engine.queue)) as unknown as Record<string, Send>;
  const send = c[CMD.sdBatch]!.bind(c);
  let faults = 0;
  c[CMD.sdBatch] = async (...args: unknown[]) => {
    const reply = await send(...args);
    if (fault(args)) {
      faults++;
      throw new Error('Command timed out');
    }
    return reply;
  };
  return { faults: () => faults };
}

/** A call carrying a release that ends the chain (`'r', sid, own, token, '1', chain`). */
const endsChain = (args: unknown[]) => {
  const i = args.indexOf('r');
  return i > 0 && args[i + 4] === '1';
};

describe('a dispatched stage whose release reply is lost is sent once', () => {
  it("a job's release ran but its reply was lost: the release is sent again, the job completes, the stage is sent once", async () => {
    const h = harness({ retry: { attempts: 5, backoff: { type: 'fixed', delay: 100 } } });
    // the first attempt fails for real (the job takes the stage's licence), the second is sent:
    // its release is awaited, as it ends the licence
    h.executor.script(ref, new Error('downstream 503'), SENT, SENT);
    let lost = false;
    const calls = await interceptBatch(h, (args) => {
      if (lost || !endsChain(args)) return false;
      return (lost = true);
    });
    const worker = h.engine.createWorker({ concurrency: 1 });
    const completed = new Promise<Job>((resolve) => worker.on('completed', resolve));
    const failed: unknown[] = [];
    h.engine.on('releaseFailed', (e) => failed.push(e));
    await h.engine.enqueue(ref, {});
    const job = await completed;
    expect(calls.faults()).toBe(1);
    expect(job.attemptsMade).toBe(2);
    expect(job.returnvalue).toMatchObject({ dispatched: true });
    // the repeat found the lock gone because the first try had run: not a lost lock
    expect(job.returnvalue).not.toHaveProperty('lockLost');
    expect(h.executor.callsOf(ref).filter((c) => c.result?.dispatched === true)).toHaveLength(1);
    expect(failed).toEqual([]);
    // the retried release found the lock gone (the first one had run): nothing of the stage is left
    expect(await h.redis.zcard(`${h.prefix}:${h.queueName}:sd:licences`)).toBe(0);
  });

  it('the reply of every try of a release is lost: the direct call answers dispatched and releaseFailed is emitted once', async () => {
    const h = harness();
    h.executor.script(ref, SENT);
    const calls = await interceptBatch(h, endsChain);
    const failed: { ref: unknown; error: unknown }[] = [];
    h.engine.on('releaseFailed', (e) => failed.push(e));
    const result = await h.engine.dispatchStage(ref, {});
    expect(result).toMatchObject({ dispatched: true, reason: null });
    expect(calls.faults()).toBe(3);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.ref).toEqual(ref);
    expect(String(failed[0]!.error)).toMatch(/timed out/);
    expect(h.executor.callsOf(ref)).toHaveLength(1);
    // the release did run in Redis (only its reply was lost): the stage is free again
    expect(await h.engine.isStageDeferred(ref)).toBe(false);
    expect((await h.engine.dispatchStage(ref, {})).dispatched).toBe(true);
  });
});
