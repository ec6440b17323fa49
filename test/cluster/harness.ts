import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import IORedis, { Cluster, type ClusterOptions } from 'ioredis';
import { freePorts } from '../helpers/ports';
import { spawnRedisServer } from '../helpers/private-redis';

/**
 * A private Redis Cluster for tests: N masters + N replicas on free loopback
 * ports, each redis-server in its own temp dir with `appendonly yes` and a
 * short `cluster-node-timeout`, created with `redis-cli --cluster create`,
 * and stopped by pid in `stop()`.
 */

export interface ClusterNodeProcess {
  port: number;
  busPort: number;
  dir: string;
  child: ChildProcess;
  /** Set once the process has exited. */
  exited: boolean;
}

export interface HarnessOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** `cluster-node-timeout`, ms: how long a master may be silent before its replica takes over. */
  nodeTimeoutMs?: number;
}

/** True when redis-server and redis-cli are on the PATH. */
export function redisServerAvailable(): boolean {
  const ok = (cmd: string) => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0;
  return ok('redis-server') && ok('redis-cli');
}

/** Client options that let commands ride through a failover (CLUSTERDOWN, MOVED, a dead node). */
export const FAILOVER_TOLERANT: ClusterOptions = {
  retryDelayOnClusterDown: 300,
  retryDelayOnFailover: 300,
  retryDelayOnTryAgain: 300,
  maxRedirections: 64,
  slotsRefreshTimeout: 2000,
};

async function poll<T>(check: () => Promise<T | undefined | false>, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (e) {
      if (e instanceof NodeExitedError) throw e;
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`Cluster harness: timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

class NodeExitedError extends Error {}

/** `INFO` text as field -> value (section headers and blank lines skipped). */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}

export class RedisClusterHarness {
  readonly nodes: ClusterNodeProcess[] = [];
  private readonly clients = new Map<number, IORedis>();
  private readonly clusters = new Set<Cluster>();

  private constructor(readonly nodeTimeoutMs: number) {}

  /** Starts a cluster; retried on fresh ports if a node could not start (e.g. a port taken meanwhile). */
  static async start(opts: HarnessOptions = {}): Promise<RedisClusterHarness> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await RedisClusterHarness.startOnce(opts);
      } catch (error) {
        if (attempt >= 3 || !(error instanceof NodeExitedError)) throw error;
      }
    }
  }

  private static async startOnce(opts: HarnessOptions): Promise<RedisClusterHarness> {
    const masters = opts.masters ?? 3;
    const replicas = opts.replicasPerMaster ?? 1;
    const h = new RedisClusterHarness(opts.nodeTimeoutMs ?? 1500);
    try {
      const total = masters * (1 + replicas);
      const ports = await freePorts(total * 2);
      for (let i = 0; i < total; i++) h.spawnNode(ports[2 * i]!, ports[2 * i + 1]!);
      await Promise.all(
        h.nodes.map((n) =>
          poll(
            async () => {
              if (n.exited) throw new NodeExitedError(`redis-server on port ${n.port} exited at start-up`);
              return (await h.node(n.port).ping()) === 'PONG';
            },
            `node ${n.port}`,
            10_000,
          ),
        ),
      );
      const create = spawnSync(
        'redis-cli',
        [
          '--cluster',
          'create',
          ...h.nodes.map((n) => `127.0.0.1:${n.port}`),
          '--cluster-replicas',
          String(replicas),
          '--cluster-yes',
        ],
        { encoding: 'utf8', timeout: 60_000 },
      );
      if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}\n${create.stderr}`);
      await h.waitHealthy(30_000);
      return h;
    } catch (error) {
      await h.stop();
      throw error;
    }
  }

  private spawnNode(port: number, busPort: number): void {
    const dir = mkdtempSync(join(tmpdir(), `sd-cluster-${port}-`));
    const child = spawnRedisServer(port, dir, [
      '--cluster-port',
      String(busPort),
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(dir, 'nodes.conf'),
      '--cluster-node-timeout',
      String(this.nodeTimeoutMs),
      '--appendonly',
      'yes',
      '--save',
      '',
      '--logfile',
      join(dir, 'redis.log'),
    ]);
    const node: ClusterNodeProcess = { port, busPort, dir, child, exited: false };
    child.once('exit', () => {
      node.exited = true;
    });
    this.nodes.push(node);
  }

  /** A plain client on one node (not cluster-aware), closed by `stop()`. */
  node(port: number): IORedis {
    let c = this.clients.get(port);
    if (!c) {
      c = new IORedis({
        host: '127.0.0.1',
        port,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
        retryStrategy: () => 200,
      });
      c.on('error', () => undefined);
      this.clients.set(port, c);
    }
    return c;
  }

  get startupNodes(): { host: string; port: number }[] {
    return this.live().map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  /** An ioredis Cluster on this cluster; closed by `stop()` unless closed before. */
  connect(options: ClusterOptions = {}): Cluster {
    const c = new Cluster(this.startupNodes, { ...FAILOVER_TOLERANT, ...options });
    c.on('error', () => undefined);
    this.clusters.add(c);
    return c;
  }

  live(): ClusterNodeProcess[] {
    return this.nodes.filter((n) => !n.exited);
  }

  /** Ports of the live masters, from `ROLE` on each node. */
  async masters(): Promise<number[]> {
    const out: number[] = [];
    for (const n of this.live()) {
      const role = (await this.node(n.port).call('ROLE')) as [string, ...unknown[]];
      if (role[0] === 'master') out.push(n.port);
    }
    return out.sort((a, b) => a - b);
  }

  /** The port of the live master that serves `key`'s slot. */
  async ownerOf(key: string): Promise<number> {
    const any = this.node(this.live()[0]!.port);
    const slot = Number(await any.call('CLUSTER', 'KEYSLOT', key));
    const slots = (await any.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]]][];
    const range = slots.find(([from, to]) => slot >= from && slot <= to);
    if (!range) throw new Error(`slot ${slot} is not served`);
    return Number(range[2][1]);
  }

  /**
   * Every live node says `cluster_state:ok` with all 16384 slots ok, agrees on
   * the masters, and every replica's link to its master is up.
   */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    const expectedMasters = Math.round(this.nodes.length / 2);
    await poll(
      async () => {
        for (const n of this.live()) {
          const info = parseInfo((await this.node(n.port).call('CLUSTER', 'INFO')) as string);
          if (info.cluster_state !== 'ok' || info.cluster_slots_ok !== '16384') return false;
          const repl = parseInfo(await this.node(n.port).info('replication'));
          if (repl.role === 'slave' && repl.master_link_status !== 'up') return false;
        }
        const masters = await this.masters();
        // after a failover a dead master's replica is a master without a replica
        return masters.length >= Math.min(expectedMasters, this.live().length) ? true : false;
      },
      'cluster_state:ok on every node',
      timeoutMs,
    );
  }

  /** The port of the live replica of master `port`, from `ROLE` on each node. */
  async replicaOf(port: number): Promise<number> {
    for (const n of this.live()) {
      const role = (await this.node(n.port).call('ROLE')) as [string, string?, number?];
      if (role[0] === 'slave' && Number(role[2]) === port) return n.port;
    }
    throw new Error(`master ${port} has no live replica`);
  }

  /** Freezes a node's process (SIGSTOP): it holds its sockets but answers nothing until `resume`. */
  pause(port: number): void {
    const n = this.nodes.find((x) => x.port === port && !x.exited);
    if (!n) throw new Error(`no live node on port ${port}`);
    process.kill(n.child.pid as number, 'SIGSTOP');
  }

  resume(port: number): void {
    const n = this.nodes.find((x) => x.port === port && !x.exited);
    if (n) process.kill(n.child.pid as number, 'SIGCONT');
  }

  /** Kills one node's process (SIGKILL by default) and waits until it has exited. */
  async kill(port: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const n = this.nodes.find((x) => x.port === port);
    if (!n || n.exited) return;
    const c = this.clients.get(port);
    this.clients.delete(port);
    c?.disconnect();
    process.kill(n.child.pid as number, signal);
    await poll(async () => n.exited, `node ${port} to exit`, 10_000);
  }

  /** Waits until `port` is no longer a master in anyone's view and its slots are served by another node. */
  async waitFailover(deadPort: number, timeoutMs = 30_000): Promise<number> {
    return poll(
      async () => {
        const any = this.node(this.live()[0]!.port);
        const slots = (await any.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]]][];
        if (slots.some((s) => Number(s[2][1]) === deadPort)) return undefined;
        const info = parseInfo((await any.call('CLUSTER', 'INFO')) as string);
        if (info.cluster_state !== 'ok') return undefined;
        return slots.length;
      },
      `a replica to take over from ${deadPort}`,
      timeoutMs,
    );
  }

  /** The node id of the node on `port` (`CLUSTER MYID`). */
  async nodeId(port: number): Promise<string> {
    return (await this.node(port).call('CLUSTER', 'MYID')) as string;
  }

  /** The hash slot of `key` (`CLUSTER KEYSLOT`). */
  async slotOf(key: string): Promise<number> {
    return Number(await this.node(this.live()[0]!.port).call('CLUSTER', 'KEYSLOT', key));
  }

  /**
   * Starts moving `slot` from master `from` to master `to`, as `redis-cli --cluster reshard`
   * does: `IMPORTING` on the target first, then `MIGRATING` on the source. Until the move is
   * completed or reverted, the source answers ASK for keys it no longer has and TRYAGAIN
   * for a multi-key command whose keys are split between the two.
   */
  async beginMigration(slot: number, from: number, to: number): Promise<void> {
    await this.node(to).call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', await this.nodeId(from));
    await this.node(from).call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', await this.nodeId(to));
  }

  /**
   * Moves up to `limit` keys of `slot` from node `from` to node `to` with `MIGRATE` (in batches
   * of 100, `REPLACE`), and returns how many moved. `asking` sends `ASKING` first, for a
   * node that holds keys of a slot it is only importing (a migration being reverted).
   */
  async migrateKeys(slot: number, from: number, to: number, limit = Infinity, asking = false): Promise<number> {
    let moved = 0;
    while (moved < limit) {
      const keys = (await this.node(from).call(
        'CLUSTER',
        'GETKEYSINSLOT',
        String(slot),
        String(Math.min(100, limit - moved)),
      )) as string[];
      if (keys.length === 0) break;
      const p = this.node(from).pipeline();
      if (asking) p.call('ASKING');
      p.call('MIGRATE', '127.0.0.1', String(to), '', '0', '10000', 'REPLACE', 'KEYS', ...keys);
      for (const [err] of (await p.exec()) ?? []) if (err) throw err;
      moved += keys.length;
    }
    return moved;
  }

  /**
   * Completes a move begun by `beginMigration`: the remaining keys go to `to`, then
   * `SETSLOT <slot> NODE <to>` on the target, the source and every other master (the
   * documented order), and it waits until every live node serves the slot from `to`.
   */
  async completeMigration(slot: number, from: number, to: number, timeoutMs = 20_000): Promise<void> {
    await this.migrateKeys(slot, from, to);
    const toId = await this.nodeId(to);
    const others = (await this.masters()).filter((p) => p !== from && p !== to);
    for (const port of [to, from, ...others])
      await this.node(port).call('CLUSTER', 'SETSLOT', String(slot), 'NODE', toId);
    await this.waitSlotServedBy(slot, to, timeoutMs);
  }

  /**
   * Reverts a move begun by `beginMigration`: keys created on (or moved to) the target go
   * back to the source, and both nodes mark the slot `STABLE`; the source serves it again.
   */
  async revertMigration(slot: number, from: number, to: number, timeoutMs = 20_000): Promise<void> {
    // the source owns the slot again first, so that it accepts the keys coming back
    await this.node(from).call('CLUSTER', 'SETSLOT', String(slot), 'STABLE');
    await this.migrateKeys(slot, to, from, Infinity, true);
    await this.node(to).call('CLUSTER', 'SETSLOT', String(slot), 'STABLE');
    await this.waitSlotServedBy(slot, from, timeoutMs);
  }

  /** Keys of `slot` held by the node on `port` (`CLUSTER COUNTKEYSINSLOT`). */
  async keysInSlot(slot: number, port: number): Promise<number> {
    return Number(await this.node(port).call('CLUSTER', 'COUNTKEYSINSLOT', String(slot)));
  }

  /** Waits until every live node says `slot` is served by `port`, with no migration open on any master. */
  async waitSlotServedBy(slot: number, port: number, timeoutMs = 20_000): Promise<void> {
    await poll(
      async () => {
        for (const n of this.live()) {
          const slots = (await this.node(n.port).call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
          const range = slots.find(([a, b]) => slot >= a && slot <= b);
          if (!range || Number(range[2][1]) !== port) return false;
        }
        for (const m of await this.masters()) {
          const nodes = (await this.node(m).call('CLUSTER', 'NODES')) as string;
          const myself = nodes.split('\n').find((l) => l.includes('myself'));
          if (myself?.includes(`[${slot}-`)) return false;
        }
        return true;
      },
      `slot ${slot} to be served by ${port} on every node`,
      timeoutMs,
    );
  }

  /** Closes clients, stops every node by pid, removes the temp dirs. */
  async stop(): Promise<void> {
    // disconnect, not quit: a Cluster that still knows a killed node would keep retrying it
    for (const c of this.clusters) c.disconnect();
    this.clusters.clear();
    for (const c of this.clients.values()) c.disconnect();
    this.clients.clear();
    for (const n of this.nodes) {
      if (!n.exited && n.child.pid) {
        try {
          process.kill(n.child.pid, 'SIGTERM');
        } catch {
          n.exited = true;
        }
      }
    }
    const deadline = Date.now() + 10_000;
    while (this.nodes.some((n) => !n.exited) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    for (const n of this.nodes) {
      if (!n.exited && n.child.pid) {
        try {
          process.kill(n.child.pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
      rmSync(n.dir, { recursive: true, force: true });
    }
  }
}

/** Deletes every key under `prefix` on every master (tests only; the library never scans). */
export async function dropClusterPrefix(cluster: Cluster, prefix: string): Promise<void> {
  // all keys under a hash-tagged prefix share one slot, so they can go in one DEL per node
  const byPort = new Map<number, string[]>();
  for (const { key, port } of await clusterKeysUnder(cluster, prefix))
    byPort.set(port, [...(byPort.get(port) ?? []), key]);
  await Promise.all(
    cluster.nodes('master').map(async (node) => {
      const keys = byPort.get(node.options.port as number) ?? [];
      if (keys.length > 0) await node.del(...keys);
    }),
  );
}

/** Every key under `prefix`, from every master, with the port of the node holding it. */
export async function clusterKeysUnder(cluster: Cluster, prefix: string): Promise<{ key: string; port: number }[]> {
  const out: { key: string; port: number }[] = [];
  await Promise.all(
    cluster.nodes('master').map(async (node) => {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        for (const key of keys) out.push({ key, port: node.options.port as number });
      } while (cursor !== '0');
    }),
  );
  return out.sort((a, b) => a.key.localeCompare(b.key));
}
