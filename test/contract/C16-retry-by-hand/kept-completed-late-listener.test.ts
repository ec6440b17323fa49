import { DelayedError, Worker, type Job } from 'bullmq';
import { harness, notSent, SENT } from '../../helpers/engine';
import { client, waitFor } from '../../helpers/redis';
import { handedOn } from '../../helpers/jobs';
import type { StageRef } from '../../../src';
import { redisClient } from '../../../src/bullmq/adapter';

/**
 * Commit 20efc5d (src/engine.ts recordFailures, the 'completed' listener, and
 * markFinished in src/lua/scripts.ts ~l.168): the engine's Worker drops a kept completed job's
 * stalled-count mark (`sdt`) by running markFinished again once BullMQ completed the job
 * (`finishedOn` set). That request is fire-and-forget (`void store.markFinished(...)`), sent
 * on the engine's queue connection after BullMQ's 'completed' event. If an operator (or a
 * script retrying completed jobs, Bull Board's Retry) retries the job before that request lands
 * (the engine's connection is a few ms behind: a busy batch, latency), BullMQ's reprocessJob has
 * already deleted `finishedOn`, so the late markFinished takes the "before BullMQ finished it"
 * branch and writes `sdf` = atm and `sdt` = stc again, on the retried job. This is a
 * state again (fbf1d40): when the retried run then stalls before its begin, `stc` > `sdt` makes
 * begin take the operator's retry for a crash redelivery; the job had deferred (`sds`), so it
 * completes `superseded` and the stage is never sent. The README promises a retry by hand of a
 * kept completed job dispatches the stage.
 * The engine's connection is held back 300 ms with a BLPOP on it (a stand-in for latency);
 * the stall is simulated as a test (the lock deleted, the stalled check hands it on).
 * Control (checked by hand): the same test with the retry sent 150 ms after the 'completed'
 * event and no BLPOP passes (the listener's mark lands first and drops `sdt`); with no BLPOP and
 * the retry sent from the 'completed' handler at once it fails too (the retry still wins).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
const data = { v: 1, scope: image.scope, stage: image.stage, payload: {} };

describe("C16: the 'completed' listener's markFinished landing after a retry by hand", () => {
  it('a kept completed job that deferred, retried by hand right after it completed, sends its stage when its retried run stalls before its begin (the late listener mark re-recorded sdt: never sent)', async () => {
    const h = harness();
    // a short capacity window (the downstream's hint): its wake-up sends the stage soon after
    h.executor.script(image, notSent('no_worker_available', { retryAfterMs: 100 }), SENT, SENT);
    const redis = client();
    // the engine's queue connection (its scripts and markFinished go on it)
    const engineConn = (await redisClient(h.engine.queue)) as unknown as {
      blpop(key: string, timeout: number): Promise<unknown>;
      ping(): Promise<unknown>;
    };
    const job = await h.engine.queue.add('image', data, { jobId: 'kept-1', attempts: 3, removeOnComplete: false });
    let runs = 0;
    let held: Promise<unknown> | undefined;
    const worker = new Worker(
      h.queueName,
      async (j: Job, token?: string) => {
        if (j.id !== job.id) return h.engine.processor(j, token);
        runs += 1;
        if (runs === 2) {
          // the retried run: the engine's late mark has landed (FIFO on its connection) ...
          await held;
          await engineConn.ping();
          // ... then this worker freezes before its begin: the stalled check hands the job on
          await handedOn(redis, `${h.prefix}:${h.queueName}:${j.id}`);
          throw new DelayedError();
        }
        const out = await h.engine.processor(j, token);
        if (runs === 1) {
          // the engine's connection falls a little behind (its markFinished of the 'completed'
          // event will wait behind this)
          held = engineConn.blpop(`${h.prefix}:${h.queueName}:r24-nothing`, 0.3);
        }
        return out;
      },
      { connection: client({ maxRetriesPerRequest: null }), prefix: h.prefix, stalledInterval: 300 },
    );
    worker.on('error', () => undefined);
    // the operator retries the kept job as soon as it shows as completed (resetAttemptsMade)
    const completions: unknown[] = [];
    worker.on('completed', (j: Job, result: unknown) => {
      if (j.id === job.id) completions.push(result);
      if (j.id === job.id && runs === 1) void j.retry('completed', { resetAttemptsMade: true }).catch(() => undefined);
    });
    h.engine.attachWorker(worker);
    try {
      await waitFor(() => runs >= 3, 'the retried job was handed on and ran again', 15_000);
      await waitFor(() => completions.length >= 2, 'the retried job completed', 15_000);
      const retried = completions[1] as { dispatched?: boolean; reason?: string | null };
      // the retry by hand must send the stage (README); it completes superseded, never sent
      expect({ dispatched: retried.dispatched, reason: retried.reason }).toEqual({ dispatched: true, reason: null });
      // the deferral, the retry by hand, and the wake-up when it ran first (this Worker, concurrency
      // 1, was held by the stalled run: the retried job, first in line, may take the stage from it)
      expect([2, 3]).toContain(h.executor.callsFor(image));
    } finally {
      await worker.close();
    }
  }, 30_000);
});
