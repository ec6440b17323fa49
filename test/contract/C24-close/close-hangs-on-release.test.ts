import { createDispatchEngine, type StageRef } from '../../../src';
import { PrivateRedis } from '../../helpers/private-redis';
import { isolated } from '../../helpers/redis';
import { latch, sleep } from '../../helpers/jobs';

/**
 * Path: `engine.close()` while an executor runs, and Redis stops answering (a frozen
 * server, a partition that drops packets: the socket stays open) before the attempt
 * ends. close() aborts the executor's signal; the executor stops and answers that it
 * sent nothing. The attempt then awaits its release (src/dispatch.ts `unsent`,
 * `store.release(...)`, ~l.411), a BATCH on a connection that never answers and has no
 * timeout. `Dispatcher.close()` (src/dispatch.ts:185-195) loops
 * `while (!(await settlesWithin(idle, BEGIN_WAIT_MS)) && this.running.size > 0)`, and the
 * attempt leaves `running` only when that release returns: close() never resolves, the
 * store's and the Queue's connections are never closed (so the release is never cut off
 * either), and `dispatchStage` never settles. a fix bounded the same hang for an
 * attempt still in its begin; an attempt whose executor already answered "nothing sent"
 * hangs the deploy the same way.
 *
 * Expected (README, "engine.close() while executors run": "running executors are aborted
 * and waited for"; "engine.close() while ... under way": "a call still waiting then (its
 * Redis does not answer) rejects with EngineClosedError"; docs/design.md: a lock whose
 * release cannot land "lapses after `lockMs`, as after a crash"): the aborted executor
 * has answered, nothing was sent, so close() ends (within its bounds: 2 s for calls, 1 s
 * per QUIT) and the call settles (its interrupted result, or EngineClosedError). What happens: close() is still
 * pending after 8 s (for ever, until Redis answers again).
 */
const ref: StageRef = { scope: ['book-27', 'frozen'], stage: 'image' };

describe('C24: close() while an executor runs and Redis stops answering', () => {
  it('engine.close() never ends when Redis stops answering while an aborted executor winds down (its release is waited for without bound)', async () => {
    const redis = await PrivateRedis.start();
    const { prefix, queueName } = isolated();
    const running = latch();
    const engine = createDispatchEngine({
      connection: { host: '127.0.0.1', port: redis.port },
      prefix,
      queueName,
      executor: async (_ref, _payload, { signal }) => {
        running.open();
        // a downstream call that honours the signal: it stops, nothing was sent
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        return { dispatched: false, jobs: 0, reason: 'no_worker_available' };
      },
    });
    engine.queue.on('error', () => undefined);
    let closing: Promise<unknown> | undefined;
    let frozen = false;
    try {
      await engine.waitUntilReady();
      const call = engine.dispatchStage(ref, {}).then(
        (r) => `resolved: ${r.reason}`,
        (e: Error) => `rejected: ${e.name}`,
      );
      await running.opened;
      // Redis stops answering while the executor runs (the deploy's SIGTERM arrives now)
      process.kill(redis.pid, 'SIGSTOP');
      frozen = true;
      closing = engine.close();
      const close = await Promise.race([
        closing.then(() => 'closed'),
        sleep(8000).then(() => 'still closing after 8 s'),
      ]);
      const settled = await Promise.race([call, sleep(100).then(() => 'still pending')]);
      // the call's release was cut off: it rejects with EngineClosedError (C24), not the connection's own error
      expect({ close, settled }).toEqual({ close: 'closed', settled: 'rejected: EngineClosedError' });
    } finally {
      if (frozen) process.kill(redis.pid, 'SIGCONT');
      await closing?.catch(() => undefined);
      await redis.stop();
    }
  }, 30_000);
});
