import { harness, notSent } from '../../helpers/engine';
import { stubWait } from '../../helpers/replica-wait';

/**
 * With `waitForReplicas`, a transaction whose write failed inside EXEC (here: the deferral's
 * script meets a wait index of another type, WRONGTYPE) answers with that error: no `WAIT` is
 * sent for it, so a `WAIT` that would fail cannot turn it into REPLICATION_UNCONFIRMED.
 */
it("C21: a deferral whose write Redis refused inside its transaction rejects with Redis' error, with no WAIT sent", async () => {
  const h = harness({ waitForReplicas: { replicas: 1, timeoutMs: 50 }, windows: { capacitySeconds: 60, jitter: 0 } });
  const w = await stubWait(h.engine.queue);
  try {
    const lags: unknown[] = [];
    h.engine.on('replicaLag', (e) => lags.push(e));
    await h.redis.set(`${h.prefix}:${h.queueName}:sd:wq:image`, 'not a wait index');
    h.executor.fallback = notSent('no_worker_available');
    w.fail(1); // a WAIT, were one sent, would fail
    const error = await h.engine.dispatchStage({ scope: ['book-1'], stage: 'image' }, {}).then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(error?.message).toMatch(/^WRONGTYPE/);
    expect(error?.code).toBeUndefined();
    expect(w.waits()).toBe(0);
    expect(lags).toEqual([]);
  } finally {
    w.restore();
  }
});
