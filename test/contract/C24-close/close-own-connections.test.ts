import IORedis from 'ioredis';
import { harness } from '../../helpers/engine';
import { redisOptions, waitFor } from '../../helpers/redis';

/** A client the user passes in; the duplicates the engine makes of it are recorded (and `patch`ed). */
function userClient(patch: (c: IORedis) => void = () => undefined) {
  const own = new IORedis({ ...redisOptions(), maxRetriesPerRequest: null });
  const made: IORedis[] = [];
  const duplicate = own.duplicate.bind(own);
  own.duplicate = (...args: Parameters<IORedis['duplicate']>) => {
    const c = duplicate(...args);
    patch(c);
    made.push(c);
    return c;
  };
  return { own, made };
}

describe('C24: close() and the connections the engine made for its workers', () => {
  it("close() closes the engine's workers and the connection it duplicated for them", async () => {
    const { own, made } = userClient();
    try {
      const h = harness({ connection: own });
      const worker = h.engine.createWorker();
      await worker.waitUntilReady();
      expect(made).toHaveLength(1);
      const dup = made[0]!;
      await h.engine.close();
      expect(worker.isRunning()).toBe(false);
      expect(worker.closing).toBeTruthy();
      await waitFor(() => dup.status === 'end', 'the duplicate closed');
      // the user's client is the user's to close
      expect(own.status).toBe('ready');
    } finally {
      own.disconnect();
    }
  });

  it('a duplicated connection whose quit() fails is disconnected', async () => {
    // as with `enableOfflineQueue: false` and Redis unreachable: quit() rejects, the client lives on
    const { own, made } = userClient((c) => {
      c.quit = () => Promise.reject(new Error("Stream isn't writeable"));
    });
    try {
      const h = harness({ connection: own });
      await h.engine.createWorker().waitUntilReady();
      await h.engine.close();
      await waitFor(() => made[0]!.status === 'end', 'the duplicate disconnected');
    } finally {
      own.disconnect();
    }
  });
});
