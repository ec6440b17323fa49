import { createDispatchEngine, type StageRef } from '../../../src';
import { PrivateRedis } from '../../helpers/private-redis';
import { isolated, waitFor } from '../../helpers/redis';
import { sleep } from '../../helpers/jobs';

/**
 * `Dispatcher.close()` (src/dispatch.ts ~l.185) stops waiting for an
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
 * then lapses after lockMs, as after a crash; docs/design.md, the crash table). What another host
 * sees of it: a dispatch of the stage is refused `dispatch_in_flight` until lockMs at most, then
 * goes through.
 */
const ref: StageRef = { scope: ['book-1'], stage: 'image' };
const LOCK_MS = 3000;

describe('C24: close() and a Redis that answers the begin late', () => {
  it('a begin that lands after close() gave up on it calls no executor (it was sending the stage unwaited) and the call rejects with EngineClosedError; another host dispatches the stage within lockMs, as after a crash', async () => {
    const redis = await PrivateRedis.start();
    const { prefix, queueName } = isolated();
    const calls: number[] = [];
    const engine = createDispatchEngine({
      connection: { host: '127.0.0.1', port: redis.port },
      prefix,
      queueName,
      lockMs: LOCK_MS,
      executor: async () => {
        calls.push(Date.now());
        return { dispatched: true, jobs: 1, reason: null };
      },
    });
    engine.queue.on('error', () => undefined);
    // another host of the queue, once the first has closed
    const other = createDispatchEngine({
      connection: { host: '127.0.0.1', port: redis.port, lazyConnect: true },
      prefix,
      queueName,
      lockMs: LOCK_MS,
      executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
    });
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
      // the late begin takes its lock once Redis answers again, not before
      const resumedAt = Date.now();
      await closing;
      const closedAt = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const settled = await Promise.race([
        call,
        new Promise<string>((r) => (timer = setTimeout(() => r('still pending'), 3000))),
      ]);
      clearTimeout(timer);
      // the release is sent, but after the Queue's QUIT on the same connection: it cannot land.
      // Another host's dispatch of the stage is refused while the lock lives, then goes through
      const answers = new Set<string>();
      await waitFor(
        async () => {
          const r = await other.dispatchStage(ref, {});
          answers.add(r.dispatched ? 'dispatched' : String(r.reason));
          return r.dispatched;
        },
        'another host dispatched the stage',
        LOCK_MS + 2000,
      );
      const sentAfter = Date.now() - resumedAt;
      expect({
        closeTookOver2s: closedAt - closeStarted >= 2000,
        executorCalls: calls.length,
        call: settled,
        otherAnswers: [...answers].filter((a) => a !== 'dispatch_in_flight'),
        otherSentWithinLockMs: sentAfter <= LOCK_MS + 500,
      }).toEqual({
        closeTookOver2s: true,
        executorCalls: 0,
        call: 'rejected: EngineClosedError',
        otherAnswers: ['dispatched'],
        otherSentWithinLockMs: true,
      });
    } finally {
      process.kill(redis.pid, 'SIGCONT');
      await closing?.catch(() => undefined);
      await other.close().catch(() => undefined);
      await redis.stop();
    }
  }, 20_000);
});
