import IORedis from 'ioredis';
import { createDispatchEngine, type StageRef } from '../../../src';
import { PrivateRedis } from '../../helpers/private-redis';
import { isolated } from '../../helpers/redis';
import { sleep } from '../../helpers/jobs';

/**
 * Commit b5526de: `Dispatcher.close()` (src/dispatch.ts ~l.185) stops waiting for an
 * attempt still in its begin after 2 s while no attempt holds a lock ("it sent nothing, and ends
 * with EngineClosedError once its connection closes"). That holds for a Redis that never answers;
 * a SLOW one (a 2.5 s stall: a fork for a snapshot, a slow AOF fsync, a busy script) answers the
 * begin after close() stopped waiting but before the store's QUIT. The begin then resolves
 * `locked` (not an error), and `run` goes on into `locked()`: the executor IS called, during the
 * close and unwaited (`if (this.closing) running.abort(...)` only aborts its signal, which an
 * executor that already handed the stage on cannot undo), after close() gave up on it. Its release
 * goes to a closed connection: the stage is sent, the caller gets an error (not a result), and the
 * stage's lock is left in Redis for lockMs (the stage is 'in flight' to every host meanwhile).
 * A caller that retries the failed dispatchStage on its next deploy sends the stage twice.
 * Simulated with SIGSTOP on a private redis-server, SIGCONT 2.3 s after close() began (inside the
 * store's 1 s QUIT wait that follows the dispatcher's 2 s).
 * Fixed: a begin that finds the engine closing calls no executor; it releases its lock at once,
 * which lands only if its connection is still open (here the Queue's QUIT went first: the lock
 * then lapses after lockMs, as after a crash; docs/design.md, the crash table).
 */
const ref: StageRef = { scope: ['book-1'], stage: 'image' };

describe('C24: close() and a Redis that answers the begin late', () => {
  it('a begin that lands after close() gave up on it calls no executor (it was sending the stage unwaited) and the call rejects with EngineClosedError; the lock it took, when its release cannot land any more, expires by itself within lockMs, as after a crash', async () => {
    const redis = await PrivateRedis.start();
    const { prefix, queueName } = isolated();
    const calls: number[] = [];
    const engine = createDispatchEngine({
      connection: { host: '127.0.0.1', port: redis.port },
      prefix,
      queueName,
      lockMs: 30_000,
      executor: async () => {
        calls.push(Date.now());
        return { dispatched: true, jobs: 1, reason: null };
      },
    });
    engine.queue.on('error', () => undefined);
    const probe = new IORedis({ host: '127.0.0.1', port: redis.port, lazyConnect: true });
    let closing: Promise<unknown> | undefined;
    try {
      await engine.waitUntilReady();
      process.kill(redis.pid, 'SIGSTOP');
      const call = engine.dispatchStage(ref, {}).then(
        (r) => `resolved: dispatched=${r.dispatched}`,
        (e: Error) => `rejected: ${e.name}`,
      );
      await sleep(100);
      const closeStarted = Date.now();
      closing = engine.close();
      await sleep(2300);
      process.kill(redis.pid, 'SIGCONT');
      await closing;
      const closedAt = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const settled = await Promise.race([
        call,
        new Promise<string>((r) => (timer = setTimeout(() => r('still pending'), 3000))),
      ]);
      clearTimeout(timer);
      await probe.connect();
      // the release is sent, but after the Queue's QUIT on the same connection: it cannot land
      const lockTtl = await probe.pttl(`${prefix}:${queueName}:sd:inflight:book-1/image`);
      expect({
        closeTookOver2s: closedAt - closeStarted >= 2000,
        executorCalls: calls.length,
        call: settled,
        lockGoneOrExpiring: lockTtl === -2 || (lockTtl > 0 && lockTtl <= 30_000),
      }).toEqual({
        closeTookOver2s: true,
        executorCalls: 0,
        call: 'rejected: EngineClosedError',
        lockGoneOrExpiring: true,
      });
    } finally {
      process.kill(redis.pid, 'SIGCONT');
      await closing?.catch(() => undefined);
      probe.disconnect();
      await redis.stop();
    }
  }, 20_000);
});
