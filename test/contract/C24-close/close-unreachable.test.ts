import { createDispatchEngine } from '../../../src';
import { deadPort, isolated } from '../../helpers/redis';
import { sleep } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * a fix makes `close()` wait for the tracked calls under way
 * (`enqueue`, `cancelActiveDispatch`, `clearDeferrals`, `wakeDeferred`, the views:
 * src/engine.ts TRACKED) BEFORE it closes the queue's connection. A call that waits for that
 * connection (Redis down, a wrong host: BullMQ's connection retries forever, ioredis queues the
 * commands) never settles until the connection is closed, and the connection is closed only
 * after the call settled: `close()` never resolves. Before the fix, `queue.close()` disconnected
 * the client that was still connecting, the call rejected, and `close()` returned. A shutdown
 * hook (SIGTERM) that awaits `engine.close()` hangs the process while Redis is unreachable.
 */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

describe('C24: close() while a call waits for a Redis that never answers', () => {
  it('close() resolves (after a bounded wait) while an enqueue waits for a connection that never comes; the enqueue ends ENGINE_CLOSED', async () => {
    const port = await deadPort();
    const { prefix, queueName } = isolated();
    const engine = createDispatchEngine({
      connection: { host: '127.0.0.1', port },
      prefix,
      queueName,
    });
    engine.queue.on('error', () => undefined); // ECONNREFUSED, each reconnect
    const pending = engine.enqueue(image, {}).then(
      () => 'resolved',
      (e: unknown) => `rejected: ${(e as Error).message}`,
    );
    await sleep(100);
    const closed = await Promise.race([engine.close().then(() => 'closed'), sleep(5000).then(() => 'hung')]);
    // clean up (best effort): end the connection the stuck close() waits behind
    type Inner = { backend: { connection: { _client?: { disconnect(): void } } } };
    (engine.queue as unknown as Inner).backend.connection._client?.disconnect();
    expect(closed).toBe('closed');
    // the call cut off by the close fails as the engine closed, with what it failed with as its cause
    expect(await Promise.race([pending, sleep(5000).then(() => 'still pending')])).toBe(
      'rejected: The dispatch engine is closed',
    );
  });
});
