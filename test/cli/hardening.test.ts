import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { createDispatchEngine, type DispatchEngine, type ExecutorResult, type StageRef } from '../../src';
import { buildOnce, ROOT } from '../helpers/build';
import { client, closeClients, dropPrefix, isolated, redisOptions, waitFor } from '../helpers/redis';
import { cliOn, run } from './run';

const NO_WORKER: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'no_worker_available' };
const prefixes: string[] = [];
const closers: (() => Promise<unknown>)[] = [];

/** A queue of its own; its keys are dropped after the file. */
function own() {
  const q = isolated();
  prefixes.push(q.prefix);
  return q;
}

// by hand, not harness(): the engines fill queues the CLI binary reads, some on a proxy or an unreachable Redis
function engineOn(
  q: { prefix: string; queueName: string },
  extra: Partial<Parameters<typeof createDispatchEngine>[0]> = {},
) {
  const e: DispatchEngine = createDispatchEngine({
    connection: client(),
    ...q,
    windows: { capacitySeconds: 300, jitter: 0 },
    executor: async () => NO_WORKER,
    ...extra,
  });
  closers.push(() => e.close());
  return e;
}

beforeAll(() => buildOnce(), 120_000);

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
  for (const p of prefixes) await dropPrefix(client(), p);
  await closeClients();
});

describe('C29: --version', () => {
  it("prints package.json's version and exits 0", async () => {
    const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    const r = await run(['--version']);
    expect(r).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});

describe('C29: a Redis that accepts the connection but never answers', () => {
  let server: Server;
  let port: number;
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('data', () => undefined); // reads every command, answers none
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('gives up after --timeout with a clear message and exit code 1', async () => {
    const r = await run(['--redis', `redis://127.0.0.1:${port}`, '--timeout', '400', 'list'], 15_000);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error: Redis at redis://127.0.0.1:${port} did not answer within 400 ms (--timeout 400)\n`);
    expect(r.ms).toBeLessThan(8_000);
  });

  it('gives up by default (5 s) instead of hanging for good', async () => {
    const r = await run(['--redis', `redis://127.0.0.1:${port}`, 'show', 'book-1:image'], 20_000);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/did not answer within 5000 ms/);
    expect(r.ms).toBeGreaterThanOrEqual(4_500);
    expect(r.ms).toBeLessThan(15_000);
  });

  it('refuses a --timeout that is not a positive integer (exit 2)', async () => {
    const r = await run(['--timeout', '0', 'list']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--timeout <ms>.*positive integer/);
  });
});

describe('C29: cancel on a queue that is not a dispatch queue', () => {
  it('refuses a queue whose jobs are none of the engine, and the unrelated job stays', async () => {
    const q = own();
    const orders = new Queue(q.queueName, { connection: client(), prefix: q.prefix });
    closers.push(() => orders.close());
    const job = await orders.add('order', { n: 123 }, { deduplication: { id: 'order/123' } });
    const r = await cliOn(q, 'cancel', 'order:123');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: Not a dispatch queue \(queue ".*", prefix ".*"\): it has jobs/);
    expect(r.stderr).toContain('Nothing was changed');
    expect(r.stdout).toBe('');
    expect(await orders.getJobState(job.id!)).toBe('waiting');
    expect(await client().get(`${q.prefix}:${q.queueName}:de:order/123`)).toBe(job.id);
  });

  it("on a dispatch queue, refuses a stage whose deduplication key names a job that is not the engine's", async () => {
    const q = own();
    await engineOn(q).dispatchStage({ scope: ['book-1'], stage: 'image' }, null); // a licence: a dispatch queue
    const orders = new Queue(q.queueName, { connection: client(), prefix: q.prefix });
    closers.push(() => orders.close());
    const job = await orders.add('order', { n: 123 }, { deduplication: { id: 'order/123' } });
    const r = await cliOn(q, 'cancel', 'order:123');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /Refusing to cancel order:123: .*de:order\/123 names the job ".*", which is not a dispatch job/,
    );
    expect(await orders.getJobState(job.id!)).toBe('waiting');
  });

  it("still cancels the engine's own enqueued job", async () => {
    const q = own();
    const e = engineOn(q);
    const ref: StageRef = { scope: ['order'], stage: '123' };
    const added = await e.enqueue(ref, null);
    expect(added.added).toBe(true);
    const r = await cliOn(q, '--json', 'cancel', 'order:123');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ removedJobs: 1 });
    expect(await e.queue.getJob(added.jobId!)).toBeUndefined();
  });
});

describe('C29: control characters in scope text', () => {
  const ref: StageRef = { scope: ['evil\x1b[2J', 'two\nlines', 'c1\u009b\u202e'], stage: 'img\t1' };
  const shown = 'evil\\u001b[2J/two\\nlines/c1\\u009b\\u202e:img\\t1';
  const q = own();

  beforeAll(async () => {
    expect((await engineOn(q).dispatchStage(ref, null)).dispatched).toBe(false);
  });

  it('escapes control characters from scope text in table output', async () => {
    const r = await cliOn(q, 'list');
    expect(r.code).toBe(0);
    // eslint-disable-next-line no-control-regex
    expect(r.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]!.startsWith(`${shown}  capacity`)).toBe(true);
  });

  it('show escapes them too, and the printed ref pastes back', async () => {
    const r = await cliOn(q, 'show', shown);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`stage        ${shown}\n`);
    expect(r.stdout).toMatch(/state\s+deferred/);
    // eslint-disable-next-line no-control-regex
    expect(r.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
  });

  it('--json stays exact', async () => {
    const r = await cliOn(q, '--json', 'list');
    const [row] = JSON.parse(r.stdout) as { scope: string[]; stage: string; ref: string }[];
    expect(row).toMatchObject({ scope: ref.scope, stage: ref.stage });
    expect(row!.ref).toBe('evil\x1b[2J/two\nlines/c1\u009b\u202e:img\t1');
  });
});

describe('C29: credentials in messages', () => {
  const cases = [
    'redis://127.0.0.1:1/?password=s3cr3tA',
    'redis://:s3cr3tB@127.0.0.1:1',
    'redis://user:s3cr3tC@127.0.0.1:1/0?db=0',
    'redis://127.0.0.1:1?db=1&sentinelPassword=s3cr3tD&password=s3cr3tE',
    'redis://127.0.0.1:1?password=s3cr%3Ft%20F',
  ];

  it.each(cases)('masks every credential of %s in its error message', async (url) => {
    const r = await run(['--redis', url, '--timeout', '2000', 'list']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: Cannot connect to Redis at redis:\/\/\S*\*\*\*\S*: .*ECONNREFUSED/);
    expect(`${r.stdout}${r.stderr}`).not.toMatch(/s3cr/);
  });

  it('masks ?password= in the unknown-queue message of a live Redis', async () => {
    const o = redisOptions();
    const secret = o.password ?? 's3cr3tG';
    const url = `redis://${o.host}:${o.port}/?password=${encodeURIComponent(secret)}`;
    const r = await run(['--redis', url, '--queue', 'no-such-queue-15-8', 'list']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`at redis://${o.host}:${o.port}/?password=***`);
    expect(r.stderr).not.toContain(secret);
  });
});

describe('C29: a stage whose enqueued job failed for good', () => {
  it('show reports failed, with the enqueued job and its failedReason, not idle', async () => {
    const q = own();
    const e = engineOn(q, {
      retry: { attempts: 1 },
      executor: async () => ({ dispatched: false, jobs: 0, reason: 'gpu_on_fire' }),
    });
    const ref: StageRef = { scope: ['book-8'], stage: 'image' };
    const added = await e.enqueue(ref, null);
    expect(added.jobId).toMatch(/^book-8\/image@r\./);
    e.createWorker();
    await waitFor(async () => (await e.queue.getFailedCount()) === 1, 'the enqueued job to fail');
    const r = await cliOn(q, '--json', 'show', 'book-8:image');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ state: 'failed', jobState: 'failed', jobId: added.jobId });
    expect(JSON.parse(r.stdout).failedReason).toMatch(/gpu_on_fire/);
    const text = await cliOn(q, 'show', 'book-8:image');
    expect(text.stdout).toMatch(/state\s+failed\n/);
    expect(text.stdout).toMatch(/failed\s+.*gpu_on_fire/);
  });
});
