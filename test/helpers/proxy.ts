import { connect as connectTcp, createServer, type AddressInfo, type Socket } from 'node:net';
import { redisOptions } from './redis';

/**
 * What a proxy does with one reply chunk from Redis: `first` says it is the first after an armed
 * `EXEC` went by; true when it took the chunk (it is not passed on).
 */
type ReplyHook = (chunk: Buffer, first: boolean, inbound: Socket, outbound: Socket) => boolean;

/** What a proxy does with a connection's chunks; a hook returns true when it took the chunk (it is not passed on). */
interface Pipe {
  request?(chunk: Buffer, inbound: Socket, outbound: Socket): boolean;
  reply(chunk: Buffer, inbound: Socket, outbound: Socket): boolean;
}

/**
 * A TCP proxy on a loopback port to `target`: each connection gets the hooks `pipe()` makes for
 * it; `refuse()`: whether a new connection is turned away now. `close()` cuts every connection.
 */
async function tcpProxy(target: { host: string; port: number }, pipe: () => Pipe, refuse: () => boolean = () => false) {
  const sockets = new Set<Socket>();
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
    const hooks = pipe();
    inbound.on('data', (chunk: Buffer) => {
      if (!hooks.request?.(chunk, inbound, outbound)) outbound.write(chunk);
    });
    outbound.on('data', (chunk: Buffer) => {
      if (!hooks.reply(chunk, inbound, outbound)) inbound.write(chunk);
    });
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/**
 * A TCP proxy to the tests' Redis. `arm()`: the reply to the next `EXEC` on any connection (Redis
 * ran the transaction) is the `first` the connection's hook (one made per connection) is told of.
 * `refuse()`: whether a new connection is turned away now.
 */
async function execReplyProxy(hook: () => ReplyHook, refuse: () => boolean = () => false) {
  let armed = false;
  const p = await tcpProxy(
    redisOptions(),
    () => {
      const onReply = hook();
      let watching = false;
      return {
        request: (chunk) => {
          if (armed && /\r\nexec\r\n/i.test(chunk.toString('latin1'))) {
            armed = false;
            watching = true;
          }
          return false;
        },
        reply: (chunk, inbound, outbound) => {
          const first = watching;
          watching = false;
          return onReply(chunk, first, inbound, outbound);
        },
      };
    },
    refuse,
  );
  return { ...p, arm: () => void (armed = true) };
}

/**
 * A TCP proxy to a Redis on loopback `port`. `arm()`: the next `EXEC` sent through it (and what
 * its connection sends after it) is held back, the commands before it passed on, until `release()`.
 */
export async function execHoldingProxy(port: number) {
  let armed = false;
  let held: (() => void) | undefined;
  const p = await tcpProxy({ host: '127.0.0.1', port }, () => ({
    request: (chunk, inbound, outbound) => {
      const at = armed ? chunk.toString('latin1').search(/\*1\r\n\$4\r\nexec\r\n/i) : -1;
      if (at < 0) return false;
      armed = false;
      outbound.write(chunk.subarray(0, at));
      inbound.pause();
      held = () => {
        outbound.write(chunk.subarray(at));
        inbound.resume();
      };
      return true;
    },
    reply: () => false,
  }));
  return { ...p, arm: () => void (armed = true), holding: () => held !== undefined, release: () => held?.() };
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
