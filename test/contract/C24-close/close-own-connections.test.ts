import IORedis from 'ioredis';
import { DeferralStore } from '../../../src/deferral-store';
import { stageId, type StageRef } from '../../../src';
import { harness, SENT } from '../../helpers/engine';
import { held } from '../../helpers/held';
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

const image: StageRef = { scope: ['book-1'], stage: 'image' };

/**
 * One dispatch of `image` on `h`, whose executor holds until the stage's lock was renewed twice
 * (its PTTL grew twice, read by the test's own client) and is then released: sent.
 */
async function dispatchThroughRenewals(h: ReturnType<typeof harness>, release: () => void) {
  const lock = new DeferralStore(h.engine.queue).keys.lock(stageId(image));
  const pttls: number[] = [];
  const running = h.engine.dispatchStage(image, {});
  try {
    await waitFor(async () => {
      pttls.push(await h.redis.pttl(lock));
      return pttls.filter((p, i) => i > 0 && p > pttls[i - 1]!).length >= 2;
    }, 'two lock renewals');
  } finally {
    release();
  }
  expect(await running).toMatchObject({ dispatched: true });
}

describe("C24: the lock renewals' connection", () => {
  it("with waitForReplicas, renewals run on a connection of their own, duplicated from the engine's, and close() quits it", async () => {
    const { own, made } = userClient();
    try {
      const { release, answer } = held(SENT);
      const h = harness({
        connection: own,
        lockMs: 1000,
        waitForReplicas: { replicas: 1, timeoutMs: 100 },
        executor: answer,
      });
      await dispatchThroughRenewals(h, release);
      expect(made).toHaveLength(1);
      const renewals = made[0]!;
      expect(renewals.status).toBe('ready');
      await h.engine.close();
      await waitFor(() => renewals.status === 'end', 'the renewal connection closed');
      // the user's client is the user's to close
      expect(own.status).toBe('ready');
    } finally {
      own.disconnect();
    }
  });

  it("without waitForReplicas, renewals run on the engine's connection: none is duplicated", async () => {
    const { own, made } = userClient();
    try {
      const { release, answer } = held(SENT);
      const h = harness({ connection: own, lockMs: 1000, executor: answer });
      await dispatchThroughRenewals(h, release);
      await h.engine.close();
      expect(made).toHaveLength(0);
    } finally {
      own.disconnect();
    }
  });
});
