import IORedis from 'ioredis';
import { ReplicationUnconfirmedError, type EngineEvents } from '../../../src';
import { connectionOf, ReplicaWait } from '../../../src/store/replica-wait';
import { freePort, NO_PERSISTENCE, PrivateRedis } from '../../helpers/private-redis';
import { client, closeClients, connect } from '../../helpers/redis';

/**
 * `waitForReplicas`' WAIT (src/store/replica-wait.ts) over real connections: the tests' Redis has
 * no replica, so every WAIT comes back short after `timeoutMs` and is reported as `replicaLag`.
 * A write is confirmed against the connection that made it (its `CLIENT INFO`).
 */
afterAll(closeClients);

/** A ReplicaWait on `redis` (its pipelines counted), the lags it reports, and the connection a write on `redis` is made on. */
async function replicaWait(redis: IORedis, timeoutMs: number) {
  const lags: EngineEvents['replicaLag'][] = [];
  let pipelines = 0;
  const w = new ReplicaWait(
    { replicas: 1, timeoutMs, onLag: (e) => lags.push(e) },
    async () => {
      pipelines++;
      return redis.pipeline() as never;
    },
    'sd:route-never-exists',
  );
  const madeOn = connectionOf(await redis.client('INFO'));
  return { w, lags, madeOn, pipelines: () => pipelines };
}

describe('C21: waitForReplicas confirms each write on its own connection', () => {
  it('writes acknowledged in one turn share one WAIT: one replicaLag, counting both', async () => {
    const { w, lags, madeOn, pipelines } = await replicaWait(client(), 50);
    await Promise.all([w.confirm('defer', madeOn), w.confirm('cancel', madeOn)]);
    expect(pipelines()).toBe(1);
    expect(lags).toEqual([{ op: 'defer', writes: 2, acked: 0, wanted: 1, skipMs: 500 }]);
  });

  it('after a replicaLag no WAIT is sent for 10 × timeoutMs: a write confirmed meanwhile resolves at once', async () => {
    const { w, lags, madeOn, pipelines } = await replicaWait(client(), 500);
    await w.confirm('defer', madeOn);
    expect(lags).toEqual([{ op: 'defer', writes: 1, acked: 0, wanted: 1, skipMs: 5000 }]);
    // well inside the 5 s that follow: no WAIT, no second lag
    await w.confirm('clear', madeOn);
    expect(pipelines()).toBe(1);
    expect(lags).toHaveLength(1);
  });

  it('a write whose connection is unknown (its probe read none) is not waited for', async () => {
    const { w, lags, pipelines } = await replicaWait(client(), 50);
    await expect(w.confirm('enqueue', undefined)).resolves.toBeUndefined();
    expect(pipelines()).toBe(0);
    expect(lags).toEqual([]);
  });

  it('a WAIT that ran on another connection than the write rejects with REPLICATION_UNCONFIRMED', async () => {
    const { w } = await replicaWait(client(), 50);
    const other = connect();
    try {
      const elsewhere = connectionOf(await other.client('INFO'));
      const error = await w.confirm('defer', elsewhere).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ReplicationUnconfirmedError);
      expect(error).toMatchObject({ code: 'REPLICATION_UNCONFIRMED', cause: undefined });
    } finally {
      other.disconnect();
    }
  });

  it("a WAIT Redis refuses (the server is a replica now) rejects with REPLICATION_UNCONFIRMED, Redis' error its cause", async () => {
    // a replica of a master that is not there: it answers, and refuses writes and WAIT
    const replica = await PrivateRedis.start([...NO_PERSISTENCE, '--replicaof', '127.0.0.1', String(await freePort())]);
    const redis = new IORedis({ port: replica.port, host: '127.0.0.1' });
    try {
      const { w, lags } = await replicaWait(redis, 50);
      const error = (await w.confirm('cancel', connectionOf(await redis.client('INFO'))).catch((e: unknown) => e)) as
        ReplicationUnconfirmedError | undefined;
      expect(error).toBeInstanceOf(ReplicationUnconfirmedError);
      expect(error?.code).toBe('REPLICATION_UNCONFIRMED');
      expect(String((error?.cause as Error | undefined)?.message)).toMatch(/^(READONLY|ERR WAIT cannot be used)/);
      expect(lags).toEqual([]);
    } finally {
      redis.disconnect();
      await replica.stop();
    }
  });
});
