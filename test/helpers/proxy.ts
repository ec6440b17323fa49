import { connect as connectTcp, createServer, type AddressInfo, type Socket } from 'node:net';
import { redisOptions } from './redis';

/**
 * A TCP proxy to the tests' Redis (reviews 38 and 40). `dropAfterExec()` arms it: the reply to
 * the next `EXEC` (Redis ran the transaction) is lost with the connection, which it cuts; for
 * `outageMs` after that it refuses every new connection (Redis itself stays up).
 */
export async function replyDropProxy(outageMs = 0) {
  const target = redisOptions();
  const sockets = new Set<Socket>();
  let armed = false;
  let dropping = false;
  let downUntil = 0;
  let drops = 0;
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  };
  const server = createServer((inbound) => {
    track(inbound);
    if (Date.now() < downUntil) return void inbound.destroy();
    const outbound = connectTcp(target.port, target.host);
    track(outbound);
    inbound.on('data', (chunk: Buffer) => {
      if (armed && /\r\nexec\r\n/i.test(chunk.toString('latin1'))) {
        armed = false;
        dropping = true;
      }
      outbound.write(chunk);
    });
    outbound.on('data', (chunk: Buffer) => {
      if (dropping) {
        dropping = false;
        drops++;
        downUntil = Date.now() + outageMs;
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

/**
 * Clears `scope` on an engine connected through `proxy`, armed once the clear's `promotes`
 * promotions are done: the next `EXEC` on that connection is the batch's record, whose reply
 * is lost. Returns the clear's outcome (its count, or its error's message).
 */
export async function clearLosingRecordReply(
  engine: { queue: unknown; clearDeferrals(scope: string[]): Promise<number> },
  proxy: { dropAfterExec(): void },
  scope: string[],
  promotes: number,
): Promise<{ cleared: number } | { error: string }> {
  const backend = (engine.queue as { getBackend(): Backend }).getBackend();
  const real = backend.promote.bind(backend);
  let n = 0;
  backend.promote = async (id: string) => {
    await real(id);
    if (++n === promotes) proxy.dropAfterExec();
  };
  try {
    return await engine.clearDeferrals(scope).then(
      (cleared) => ({ cleared }),
      (e: Error) => ({ error: e.message }),
    );
  } finally {
    backend.promote = real;
  }
}
