/**
 * Runs a command against a private Redis Cluster (3 masters + 3 replicas on
 * loopback ports, started here and stopped by pid), with TEST_REDIS_CLUSTER
 * naming its nodes: `tsx scripts/with-cluster.ts jest test/deferral...`.
 */
import { spawn } from 'node:child_process';
import { RedisClusterHarness, redisServerAvailable } from '../test/cluster/harness';

async function main(): Promise<number> {
  const [command, ...args] = process.argv.slice(2);
  if (!command) throw new Error('usage: tsx scripts/with-cluster.ts <command> [args...]');
  if (!redisServerAvailable()) {
    console.error('redis-server is not installed: the cluster run needs it (apt-get install redis-server).');
    return 1;
  }
  const cluster = await RedisClusterHarness.start();
  try {
    const nodes = cluster.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
    console.error(`Redis Cluster up: ${nodes}`);
    return await new Promise<number>((resolve) => {
      const child = spawn(command, args, { stdio: 'inherit', env: { ...process.env, TEST_REDIS_CLUSTER: nodes } });
      child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    });
  } finally {
    await cluster.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
