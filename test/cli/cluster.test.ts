import { randomUUID } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { createDispatchEngine, type DispatchEngine, type ExecutorResult } from '../../src';
import { buildOnce } from '../helpers/build';
import { RedisClusterHarness, redisServerAvailable } from '../cluster/harness';
import { run } from './run';

const NO_WORKER: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'no_worker_available' };
const maybe = redisServerAvailable() ? describe : describe.skip;

maybe('C29: cluster mode', () => {
  const id = randomUUID().slice(0, 8);
  const prefix = `{t-${id}}`;
  const queueName = `q-${id}`;
  let harness: RedisClusterHarness;
  let cluster: Cluster;
  let engine: DispatchEngine;
  /** A master that does not serve the queue's slot. */
  let other: number;

  beforeAll(async () => {
    buildOnce();
    harness = await RedisClusterHarness.start({ masters: 3, replicasPerMaster: 0 });
    cluster = harness.connect();
    // by hand, not harness(): the engine runs on this file's private cluster, which the CLI binary reads
    engine = createDispatchEngine<unknown, string>({
      connection: cluster,
      prefix,
      queueName,
      waitForReplicas: false,
      windows: { capacitySeconds: 300, jitter: 0 },
      executor: async () => NO_WORKER,
    });
    expect((await engine.dispatchStage({ scope: ['book-1'], stage: 'image' }, null)).dispatched).toBe(false);
    const owner = await harness.ownerOf(`${prefix}:${queueName}:meta`);
    other = (await harness.masters()).find((p) => p !== owner)!;
  }, 90_000);

  afterAll(async () => {
    await engine?.close();
    await harness?.stop();
  });

  const on = (port: number, ...args: string[]) =>
    run(['--redis', `redis://127.0.0.1:${port}`, '--prefix', prefix, '--queue', queueName, ...args]);

  it('without --cluster, a node that does not serve the slot fails with MOVED and a hint to use --cluster', async () => {
    const r = await on(other, 'list');
    expect(r.code).toBe(1);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^error: MOVED \d+ 127\.0\.0\.1:\d+$/);
    expect(lines[1]).toMatch(/^hint: .*add --cluster$/);
    expect(lines).toHaveLength(2);
  });

  it('with --cluster, the same node reaches the queue through the cluster', async () => {
    const r = await on(other, '--cluster', '--json', 'list');
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as { ref: string }[]).map((x) => x.ref)).toEqual(['book-1:image']);
    const shown = await on(other, '--cluster', '--json', 'show', 'book-1:image');
    expect(JSON.parse(shown.stdout)).toMatchObject({ state: 'deferred', class: 'capacity' });
    const cancelled = await on(other, '--cluster', '--json', 'cancel', 'book-1:image');
    expect(cancelled.code).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ hadDeferral: true, removedJobs: 1 });
    expect(await engine.isStageDeferred({ scope: ['book-1'], stage: 'image' })).toBe(false);
  });
});
