import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import IORedis from 'ioredis';
import { createDispatchEngine, type DispatchEngine } from '../../src';
import { freePort } from './ports';

export { freePort } from './ports';

/** Arguments of a throwaway server: no RDB snapshot, no AOF (a test that wants them passes its own). */
export const NO_PERSISTENCE = ['--save', '', '--appendonly', 'no'];

/**
 * Spawns `redis-server` on loopback `port` with `dir` as its working dir, plus
 * `args`. The process is killed (SIGKILL) if the test process exits without
 * stopping it. Shared by `PrivateRedis` and the cluster harness.
 */
export function spawnRedisServer(port: number, dir: string, args: string[]): ChildProcess {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...args], {
    stdio: 'ignore',
  });
  const onExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  process.once('exit', onExit);
  child.once('exit', () => process.removeListener('exit', onExit));
  return child;
}

/** Resolves once the server on `port` answers PING with PONG (not LOADING); fails after `timeoutMs`. */
export async function waitForPong(port: number, timeoutMs = 20_000, alive: () => boolean = () => true): Promise<void> {
  // one probe for every attempt: a client per failed attempt leaves ioredis timers behind (jest then waits for them)
  const probe = new IORedis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
  });
  probe.on('error', () => undefined);
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      if (!alive()) throw new Error(`redis-server on ${port} exited at start-up`);
      try {
        if (probe.status !== 'ready') await probe.connect();
        // with appendonly, the server answers LOADING until the AOF is read
        if ((await probe.ping()) === 'PONG') return;
      } catch {
        // not up yet
      }
      if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    probe.disconnect();
  }
}

/**
 * A redis-server of the test's own: loopback, a free port, its own temp dir.
 * A test may SIGKILL it (`kill9`) and `restart` it on the same port and dir
 * (with AOF, what it had written comes back). `stop()` ends it by pid and
 * removes the dir. The one launcher of a private redis-server in the tests.
 */
export class PrivateRedis {
  private proc: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly args: string[],
  ) {}

  /** Starts a server with `args` (e.g. `['--appendonly', 'yes']`; nothing is added to them). */
  static async start(args: string[] = NO_PERSISTENCE): Promise<PrivateRedis> {
    const r = new PrivateRedis(await freePort(), mkdtempSync(join(tmpdir(), 'sd-redis-')), args);
    await r.launch();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** The pid of the running server process. */
  get pid(): number {
    return this.proc?.pid as number;
  }

  private async launch(): Promise<void> {
    const p = spawnRedisServer(this.port, this.dir, this.args);
    this.proc = p;
    await waitForPong(this.port, 20_000, () => p.exitCode === null && p.signalCode === null).catch(async (e) => {
      await this.kill9();
      throw e;
    });
  }

  private async signal(sig: NodeJS.Signals): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill(sig);
    });
  }

  /** SIGKILL, and wait for the process to be gone. */
  async kill9(): Promise<void> {
    await this.signal('SIGKILL');
  }

  /** SIGKILL, then the same server again on the same port and dir. */
  async restart(): Promise<void> {
    await this.kill9();
    await this.launch();
  }

  /** SIGTERM (SIGKILL if it is still there after 5 s), then the temp dir is removed. */
  async stop(): Promise<void> {
    const timer = setTimeout(() => void this.kill9(), 5000);
    await this.signal('SIGTERM');
    clearTimeout(timer);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A throwaway redis-server (no persistence) with `extraArgs`; the older name of `PrivateRedis.start`. */
export async function startPrivateRedis(extraArgs: string[] = []): Promise<PrivateRedis> {
  return PrivateRedis.start([...NO_PERSISTENCE, ...extraArgs]);
}

/**
 * An engine on a private Redis nothing else writes to, for the tests that count exactly: its
 * executor always answers capacity. Registers the file's `beforeAll`/`afterAll`; read the
 * handle's fields inside tests. `counters()`: the server's writes and calls per command.
 */
export function exactEngine() {
  const h = {} as {
    server: PrivateRedis;
    redis: IORedis;
    engine: DispatchEngine;
    calls: number;
    counters(): Promise<{ writes: number; commands: Record<string, number> }>;
  };
  h.calls = 0;
  h.counters = async () => {
    const persistence = await h.redis.info('persistence');
    const stats = await h.redis.info('commandstats');
    const commands: Record<string, number> = {};
    for (const m of stats.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) commands[m[1]!] = Number(m[2]);
    return { writes: Number(/rdb_changes_since_last_save:(\d+)/.exec(persistence)?.[1]), commands };
  };
  beforeAll(async () => {
    h.server = await PrivateRedis.start();
    h.redis = new IORedis({ port: h.server.port });
    // by hand, not harness(): the engine is on the private server, shared by the tests of the file
    h.engine = createDispatchEngine({
      connection: { host: '127.0.0.1', port: h.server.port },
      prefix: 'exact',
      executor: async () => {
        h.calls++;
        return { dispatched: false, jobs: 0, reason: 'no_worker_available' };
      },
    });
  });
  afterAll(async () => {
    await h.engine.close();
    await h.redis.quit();
    await h.server.stop();
  });
  return h;
}
