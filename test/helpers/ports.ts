import { createServer, type Server } from 'node:net';

/**
 * `count` distinct free loopback ports, all held open together, then released.
 * Taken below the kernel's ephemeral range (32768+), so an outgoing connection
 * cannot grab one between the check and the server (redis-server) binding it.
 * The one free-port helper of the tests and scripts.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  const ports: number[] = [];
  while (ports.length < count) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (ports.includes(port)) continue;
    const s = createServer();
    const ok = await new Promise<boolean>((resolve) => {
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (!ok) continue;
    servers.push(s);
    ports.push(port);
  }
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

/** One free loopback port (see `freePorts`). */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}
