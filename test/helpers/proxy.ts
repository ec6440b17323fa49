import { connect as connectTcp, createServer, type AddressInfo, type Socket } from 'node:net';
import { redisOptions } from './redis';

/**
 * What a proxy does with one reply chunk from Redis: `first` says it is the first after an armed
 * `EXEC` went by; true when it took the chunk (it is not passed on).
 */
type ReplyHook = (chunk: Buffer, first: boolean, inbound: Socket, outbound: Socket) => boolean;

/**
 * A TCP proxy to the tests' Redis. `arm()`: the reply to the next `EXEC` on any connection (Redis
 * ran the transaction) is the `first` the connection's hook (one made per connection) is told of.
 * `refuse()`: whether a new connection is turned away now.
 */
async function execReplyProxy(hook: () => ReplyHook, refuse: () => boolean = () => false) {
  const target = redisOptions();
  const sockets = new Set<Socket>();
  let armed = false;
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  };
  const server = createServer((inbound) => {
    track(inbound);
    if (refuse()) return void inbound.destroy();
    const outbound = connectTcp(target.port, target.host);
    track(outbound);
    const onReply = hook();
    let watching = false;
    inbound.on('data', (chunk: Buffer) => {
      if (armed && /\r\nexec\r\n/i.test(chunk.toString('latin1'))) {
        armed = false;
        watching = true;
      }
      outbound.write(chunk);
    });
    outbound.on('data', (chunk: Buffer) => {
      const first = watching;
      watching = false;
      if (!onReply(chunk, first, inbound, outbound)) inbound.write(chunk);
    });
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    arm: () => void (armed = true),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/**
 * A TCP proxy to the tests' Redis. `dropAfterExec()` arms it: the reply to
 * the next `EXEC` (Redis ran the transaction) is lost with the connection, which it cuts; for
 * `outageMs` after that it refuses every new connection (Redis itself stays up).
 */
export async function replyDropProxy(outageMs = 0) {
  let downUntil = 0;
  let drops = 0;
  const p = await execReplyProxy(
    () => (_chunk, first, inbound, outbound) => {
      if (!first) return false;
      drops++;
      downUntil = Date.now() + outageMs;
      inbound.destroy();
      outbound.destroy();
      return true;
    },
    () => Date.now() < downUntil,
  );
  return { port: p.port, dropAfterExec: p.arm, drops: () => drops, close: p.close };
}
