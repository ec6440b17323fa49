import { createServer, type Socket } from 'node:net';
import { createDispatchEngine } from '../../../src';
import { isolated } from '../../helpers/redis';
import { sleep } from '../../helpers/jobs';
import type { StageRef } from '../../../src';

/**
 * Commit 994478d bounds close()'s wait for the calls under way (2 s), then
 * "ends them ENGINE_CLOSED", for a Redis that never answers. a test pinned it with a port
 * nothing listens on. With a Redis that ACCEPTS the connection and then never answers (a hung
 * server, a partition after connect, DEBUG SLEEP), close() resolves after 2 s and the cut call
 * rejects ENGINE_CLOSED, but the engine's connections stay open after close() resolved (their
 * `quit` is queued behind a ready check that never ends; nothing disconnects them): a process
 * that waits to exit after `await engine.close()` does not exit (jest reports "did not exit").
 * Plain BullMQ's Queue.close() leaves its socket likewise; its Worker.close() hangs outright.
 * Found, with this test, after close() resolved: 3 sockets still open 1 s later.
 */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

describe('C24: close() on a Redis that accepts and never answers', () => {
  // Known limitation, documented (README, "close() while … under way"): BullMQ's own Queue and Worker
  // connections stay open on such a Redis (BullMQ marks them ended after a QUIT that never answers,
  // as plain BullMQ does); the engine drops its own connections after 1 s. `failing` flags the day
  // BullMQ closes them too.
  it.failing(
    "close() resolves, but BullMQ's own connections stay open on a Redis that accepts and never answers",
    async () => {
      const sockets = new Set<Socket>();
      const server = createServer((s) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => undefined);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as { port: number }).port;
      try {
        const { prefix, queueName } = isolated();
        const engine = createDispatchEngine({
          connection: { host: '127.0.0.1', port },
          prefix,
          queueName,
          executor: async () => ({ dispatched: true, jobs: 1, reason: null }),
        });
        engine.queue.on('error', () => undefined);
        engine.createWorker().on('error', () => undefined);
        const pending = engine.enqueue(image, {}).then(
          () => 'resolved',
          (e: unknown) => `rejected: ${(e as Error).message}`,
        );
        await sleep(300);
        const closed = await Promise.race([engine.close().then(() => 'closed'), sleep(8000).then(() => 'hung')]);
        expect(closed).toBe('closed');
        expect(await pending).toBe('rejected: The dispatch engine is closed');
        await sleep(1000);
        expect(sockets.size).toBe(0);
      } finally {
        for (const s of sockets) s.destroy();
        await new Promise((r) => server.close(r));
      }
    },
  );
});
