import { createDispatchEngine, type StageRef } from '../../../src';
import { PrivateRedis } from '../../helpers/private-redis';
import { isolated } from '../../helpers/redis';
import { sleep } from '../../helpers/jobs';

/**
 * a fix bounded close()'s wait for the calls under way (2 s, then
 * EngineClosedError) because close() hung on a Redis that never answered. The bound covers the
 * TRACKED calls only (src/engine.ts: enqueue, cancel, clear, wake, the views, waitUntilReady);
 * a direct `dispatchStage` is the dispatcher's, and `Dispatcher.close()` (src/dispatch.ts) waits
 * for `pending` to reach 0 with no bound. An attempt whose begin was sent to a Redis that then
 * stopped answering (a frozen server, a partition that drops packets: the socket stays open) has
 * not reached the executor, so nothing aborts it, and close() never resolves: a deploy hangs.
 *
 * With an `enqueue` under way instead, close() gets past its 2 s bound but then hangs in
 * BullMQ's `Queue.close()` (its QUIT is never answered on a connection that was ready; review
 * 18's test only covered a Redis silent from the start, where BullMQ disconnects instead), and
 * `cutOff()` runs only after it: the enqueue never rejects either. README ("engine.close() while
 * enqueue … is under way": "close waits up to 2 s …, then closes the connections; a call still
 * waiting then … rejects with EngineClosedError") does not hold for a Redis that stops answering
 * after the engine was ready, the common way a Redis goes silent (a freeze, a partition).
 * Simulated with SIGSTOP on a private redis-server (SIGCONT in `finally`, which lets close end).
 */
const ref: StageRef = { scope: ['book-1'], stage: 'image' };

async function frozenWith(
  call: 'dispatchStage' | 'enqueue',
): Promise<{ close: string; call: string; queueClose: string }> {
  const redis = await PrivateRedis.start();
  const { prefix, queueName } = isolated();
  const engine = createDispatchEngine({
    connection: { host: '127.0.0.1', port: redis.port },
    prefix,
    queueName,
    executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
  });
  engine.queue.on('error', () => undefined);
  // where close() stops: BullMQ's Queue.close() is called only after the attempts and calls
  let queueClose = 'not called';
  const close0 = engine.queue.close.bind(engine.queue);
  engine.queue.close = () => {
    queueClose = 'called, pending';
    return close0().then(() => void (queueClose = 'resolved'));
  };
  let closing: Promise<unknown> | undefined;
  try {
    await engine.waitUntilReady();
    process.kill(redis.pid, 'SIGSTOP');
    const pending = (call === 'dispatchStage' ? engine.dispatchStage(ref, {}) : engine.enqueue(ref, {})).then(
      () => 'resolved',
      (e: Error) => `rejected: ${e.name}`,
    );
    await sleep(200);
    closing = engine.close();
    const close = await Promise.race([closing.then(() => 'closed'), sleep(6000).then(() => 'still closing after 6 s')]);
    const settled = await Promise.race([pending, sleep(100).then(() => 'still pending')]);
    return { close, call: settled, queueClose };
  } finally {
    process.kill(redis.pid, 'SIGCONT');
    await closing?.catch(() => undefined);
    await redis.stop();
  }
}

describe('C24: close() and a Redis that stops answering', () => {
  it('engine.close() ends, and a direct dispatchStage waiting for its begin rejects with EngineClosedError, when Redis stopped answering (close hung for ever)', async () => {
    expect(await frozenWith('dispatchStage')).toEqual({
      close: 'closed',
      call: 'rejected: EngineClosedError',
      queueClose: 'resolved',
    });
  }, 20_000);

  it("engine.close() ends, and an enqueue under way rejects with EngineClosedError, when Redis stopped answering after the engine was ready (the Queue's unanswered QUIT is dropped)", async () => {
    expect(await frozenWith('enqueue')).toEqual({
      close: 'closed',
      call: 'rejected: EngineClosedError',
      queueClose: 'resolved',
    });
  }, 20_000);
});
