import { ReplicationUnconfirmedError } from '../../../src/errors';
import { ReplicaWait } from '../../../src/store/replica-wait';

/**
 * Q3: several writes sharing one WAIT (group commit) whose pipeline rejects: each
 * confirm rejects with its own ReplicationUnconfirmedError (the failure its cause), and the shared
 * `batch.done` rejection is handled (no unhandledRejection).
 */
it('C21: a shared WAIT that fails rejects every write with REPLICATION_UNCONFIRMED, no unhandled rejection', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (r: unknown) => unhandled.push(r);
  process.on('unhandledRejection', onUnhandled);
  try {
    const boom = new Error('Connection is closed.');
    const pipe: Record<string, unknown> = {};
    for (const name of ['persist', 'client', 'wait']) pipe[name] = () => pipe;
    pipe.exec = async () => {
      throw boom;
    };
    const lag: unknown[] = [];
    const w = new ReplicaWait(
      { replicas: 1, timeoutMs: 10, onLag: (e) => lag.push(e) },
      async () => pipe as never,
      'k',
    );
    const results = await Promise.allSettled([
      w.confirm('defer', '1 a b'),
      w.confirm('cancel', '1 a b'),
      w.confirm('clear', '2 c d'),
    ]);
    // a later write after the failure opens a new batch
    pipe.exec = async () => [
      [null, 0],
      [null, 'id=1 addr=a laddr=b'],
      [null, 1],
    ];
    await expect(w.confirm('enqueue', '1 a b')).resolves.toBeUndefined();
    await new Promise((r) => setTimeout(r, 50));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const r of results) {
      const e = (r as PromiseRejectedResult).reason as ReplicationUnconfirmedError;
      expect(e).toBeInstanceOf(ReplicationUnconfirmedError);
      expect(e.code).toBe('REPLICATION_UNCONFIRMED');
      expect(e.cause).toBe(boom);
    }
    expect(((results[1] as PromiseRejectedResult).reason as Error).message).toMatch(/^The cancel was written/);
    expect(unhandled).toEqual([]);
    expect(lag).toEqual([]);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
