import IORedis from 'ioredis';
import { createDispatchEngine, ReplicationUnconfirmedError, type EngineEvents } from '../../../src';
import { PrivateRedis } from '../../helpers/private-redis';
import { execHoldingProxy } from '../../helpers/proxy';
import { waitFor } from '../../helpers/redis';

/**
 * With `waitForReplicas`, a write's MULTI also reads `CLIENT INFO` (the connection the replicas'
 * WAIT is checked against). When that read fails inside EXEC while the write ran, the write is
 * unconfirmed: REPLICATION_UNCONFIRMED, that failure its cause, and no WAIT. Made to happen for
 * real on a private Redis: a proxy holds the EXEC back while the ACL rules drop `CLIENT INFO`
 * (Redis checks them again at EXEC: that command alone fails, the write runs).
 */

it('C21: a cancel whose transaction could not read its connection rejects with REPLICATION_UNCONFIRMED, the failure its cause', async () => {
  const server = await PrivateRedis.start();
  const proxy = await execHoldingProxy(server.port);
  const admin = new IORedis({ port: server.port, host: '127.0.0.1' });
  // by hand, not harness(): the engine is on a private server (through the proxy), whose ACL the test changes
  const engine = createDispatchEngine({
    connection: { host: '127.0.0.1', port: proxy.port },
    prefix: 'acl',
    waitForReplicas: { replicas: 1, timeoutMs: 50 },
    executor: async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),
  });
  try {
    await engine.waitUntilReady();
    const lags: EngineEvents['replicaLag'][] = [];
    engine.on('replicaLag', (e) => lags.push(e));
    proxy.arm();
    const cancel = engine.cancelStage({ scope: ['book-1'], stage: 'image' }).then(
      () => undefined,
      (e: unknown) => e as ReplicationUnconfirmedError,
    );
    // the cancel's MULTI is queued (the script, CLIENT INFO) and its EXEC held
    await waitFor(() => proxy.holding(), 'the EXEC held');
    await waitFor(async () => /\bmulti=2\b/.test(String(await admin.client('LIST'))), 'the MULTI queued');
    await admin.acl('SETUSER', 'default', '-client|info');
    proxy.release();
    const error = await cancel;
    expect(error).toBeInstanceOf(ReplicationUnconfirmedError);
    expect(error?.code).toBe('REPLICATION_UNCONFIRMED');
    expect(String((error?.cause as Error | undefined)?.message)).toMatch(/^NOPERM ACLs rules changed/);
    expect(lags).toEqual([]);
  } finally {
    await engine.close();
    await admin.quit();
    await proxy.close();
    await server.stop();
  }
});
