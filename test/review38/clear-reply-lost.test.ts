import { connect as connectTcp, createServer, type AddressInfo, type Socket } from 'node:net';
import type { StageRef } from '../../src';
import { harness, notSent } from '../helpers/engine';
import { redisOptions, waitFor } from '../helpers/redis';

/**
 * Review 38. A connection drop mid-clear: the batch's CLEAR (a MULTI) ran on Redis, and the
 * connection closed before its reply reached the engine. ioredis resends a pipeline left
 * unanswered by a reconnect (`autoResendUnfulfilledCommands`, on by default), so CLEAR runs a
 * second time; that run finds the markers gone and the licences already marked `!` and answers
 * nothing, and clearDeferrals reports 0 for deferrals it ended. (DEFER recognises its own resend,
 * "a client resent it after a failover": CLEAR does not.)
 */
const refs: StageRef[] = [0, 1, 2].map((i) => ({ scope: ['r38-lost', `ch-${i}`], stage: 'image' }));

/** A TCP proxy to the tests' Redis; `dropAfterExec()` loses the reply to the next EXEC and cuts the connection. */
async function proxy() {
  const target = redisOptions();
  const sockets = new Set<Socket>();
  let armed = false;
  let dropping = false;
  let drops = 0;
  const server = createServer((inbound) => {
    const outbound = connectTcp(target.port, target.host);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    inbound.on('data', (chunk: Buffer) => {
      if (armed && /\r\nexec\r\n/i.test(chunk.toString('latin1'))) {
        armed = false;
        dropping = true;
      }
      outbound.write(chunk);
    });
    outbound.on('data', (chunk: Buffer) => {
      if (dropping) {
        // Redis ran the transaction: its reply is lost with the connection
        dropping = false;
        drops++;
        inbound.destroy();
        outbound.destroy();
        return;
      }
      inbound.write(chunk);
    });
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    dropAfterExec: () => void (armed = true),
    drops: () => drops,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

type Backend = { promote(id: string): Promise<void> };

it('review 38, fixed: a clear whose CLEAR reply is lost with its connection (ioredis resends it) still answers the 3 deferrals it ended', async () => {
  const p = await proxy();
  try {
    const h = harness({
      connection: { host: '127.0.0.1', port: p.port, password: redisOptions().password },
      windows: { capacitySeconds: 300, jitter: 0 },
    });
    h.executor.fallback = notSent('no_worker_available');
    for (const r of refs) expect(await h.engine.dispatchStage(r, {})).toMatchObject({ reason: 'no_worker_available' });
    expect(await h.engine.queue.getDelayedCount()).toBe(3);

    // once the clear's promotions are done, the next EXEC on the connection is the batch's CLEAR
    const backend = (h.engine.queue as unknown as { getBackend(): Backend }).getBackend();
    const real = backend.promote.bind(backend);
    let promotes = 0;
    backend.promote = async (id: string) => {
      await real(id);
      if (++promotes === refs.length) p.dropAfterExec();
    };
    const outcome = await h.engine.clearDeferrals(['r38-lost']).then(
      (n) => ({ cleared: n }),
      (e: Error) => ({ error: e.message }),
    );
    backend.promote = real;
    expect(p.drops()).toBe(1);
    // what Redis holds: the three deferrals ended by this clear (markers gone, licences marked '!')
    await waitFor(async () => (await h.engine.listDeferred(['r38-lost'])).length === 0, 'the deferrals to be gone');
    const licences = await h.redis.zrangebylex(
      `${h.prefix}:${h.queueName}:sd:licences`,
      '[r38-lost/',
      '[r38-lost/\xff',
    );
    expect(licences.filter((l) => l.endsWith('!'))).toHaveLength(3);
    expect(await h.engine.queue.getWaitingCount()).toBe(3);
    // the answer: 3 cleared (or an error saying the outcome is unknown), not 0
    expect(outcome).toEqual({ cleared: 3 });
  } finally {
    await p.close();
  }
});
