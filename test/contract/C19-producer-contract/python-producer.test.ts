import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stageId, type StageRef } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { latch, watch } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';

/**
 * The Python producer the package ships (python/bullmq_stage_deferral.py, Debian's
 * python3-redis under /usr/bin/python3, no Node) against the engine: its stage ids
 * against the vectors (test/python/test_vectors.py), its answers against
 * engine.enqueue's, the job it adds against BullMQ's own add and the engine's worker.
 * Its installed layout (the probe found beside it) is checked by test/package/pack.test.ts.
 */
const ROOT = join(__dirname, '..', '..', '..');
const PYTHON = '/usr/bin/python3';
const PRODUCER = join(ROOT, 'python', 'bullmq_stage_deferral.py');
const PROBE = join(ROOT, 'src', 'lua', 'enqueue-probe.lua');
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Runs a command to its end (killed after 30 s). */
function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? ROOT, env: { ...process.env, ...opts.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A Python whose local clock runs an hour ahead of Redis' (a sitecustomize shifts time.time). */
function skewedClock(dir: string): Record<string, string> {
  writeFileSync(join(dir, 'sitecustomize.py'), 'import time\n_time = time.time\ntime.time = lambda: _time() + 3600\n');
  return { PYTHONPATH: dir };
}

/** The producer's command line for `ref`: its answer (one JSON line), or its exit code and message. */
async function enqueuePy(
  h: { prefix: string; queueName: string },
  ref: StageRef,
  payload: unknown,
  opts: { file?: string; extra?: string[]; cwd?: string; env?: Record<string, string> } = {},
) {
  const args = [opts.file ?? PRODUCER, '--redis', REDIS_URL, '--prefix', h.prefix, '--queue', h.queueName];
  for (const s of ref.scope) args.push(`--scope=${s}`);
  args.push(`--stage=${ref.stage}`, '--payload', JSON.stringify(payload), ...(opts.extra ?? []));
  const r = await run(PYTHON, args, { cwd: opts.cwd, env: opts.env });
  if (r.code !== 0) return { code: r.code, stderr: r.stderr } as Record<string, unknown>;
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

const deferred = { scope: ['book-1', "it's (1)", 'caf\u00e9'], stage: '📚' };
const inFlight = { scope: ['book-1', 'ch-2'], stage: 'image*' };
const pending = { scope: ['book-1', 'ch-3'], stage: 'a b+c' };
const waiting = { scope: ['book-1', 'ch-4'], stage: '~video' };
const free = { scope: ['book-1', 'a/b'], stage: 'image (hd)!' };

(onCluster ? describe.skip : describe)('C19: a Python producer', () => {
  let tmp: string;
  // a dispatch held in flight is let go, also when a test fails (the engine's close waits for it)
  let hold: ReturnType<typeof latch<void>>;
  beforeEach(() => {
    tmp = mkdtempSync(join(tmpdir(), 'sd-python-'));
    hold = latch();
  });
  afterEach(() => {
    hold.open();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("C19: its stage ids are the vectors' (the encoder urllib's quote is not)", async () => {
    const r = await run(PYTHON, ['test/python/test_vectors.py']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toEqual({ ok: true, valid: 26, invalid: 16, quoteDiffers: 5 });
  });

  it("C19: the Python producer answers as engine.enqueue does (deferred until the marker's end by Redis' clock, in flight, pending), and adds the job BullMQ's add would, which the engine's worker dispatches", async () => {
    const h = harness({ windows: { capacitySeconds: 30, idempotentSeconds: 120, jitter: 0 } });
    const env = skewedClock(tmp);
    // deferred: a capacity deferral of a ref with the characters encoders disagree on
    h.executor.script(deferred, notSent('no_worker_available'));
    await h.engine.dispatchStage(deferred, {});
    // pending: a deferral whose marker was deleted by hand; its wake-up is licensed and delayed
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    h.executor.script(pending, notSent('no_worker_available'));
    await h.engine.dispatchStage(pending, {});
    await h.redis.del(`${h.prefix}:${h.queueName}:sd:deferred:${stageId(pending)}`);
    // waiting: enqueued by the engine (BullMQ's add), no worker yet
    const enqueued = await h.engine.enqueue(waiting, {});
    // in flight: a dispatch whose executor has not answered yet
    h.executor.script(inFlight, async () => {
      await hold.opened;
      return SENT;
    });
    const running = h.engine.dispatchStage(inFlight, {});
    await waitFor(() => h.executor.callsFor(inFlight) === 1, 'the dispatch in flight');

    // deferred: `until` is the marker's end on Redis' clock, though Python's clock leads it by an hour
    const marker = `${h.prefix}:${h.queueName}:sd:deferred:${stageId(deferred)}`;
    const [[, time], [, pttl]] = (await h.redis.multi().time().pttl(marker).exec()) as [
      [null, [string, string]],
      [null, number],
    ];
    const end = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000) + pttl;
    const py = await enqueuePy(h, deferred, { n: 1 }, { env });
    // (Python reads TIME after its probe: its `until` runs late by at most the time that took)
    const [s2, us2] = await h.redis.time();
    const took = Number(s2) * 1000 + Math.floor(Number(us2) / 1000) - (end - pttl);
    expect(py.until as number).toBeGreaterThanOrEqual(end - 2);
    expect(py.until as number).toBeLessThanOrEqual(end + took + 2);
    const node = await h.engine.enqueue(deferred, { n: 1 });
    expect({ ...py, until: 0 }).toEqual({ ...node, until: 0 });
    expect(node).toMatchObject({ added: false, reason: 'deferred' });
    // in flight, pending (a wake-up licensed), pending (a job waiting for its first run)
    for (const [ref, answer] of [
      [inFlight, { added: false, reason: 'dispatch_in_flight', payloadTaken: false }],
      [pending, { added: false, reason: 'pending', jobId: wakeUps[0], payloadTaken: false }],
      [waiting, { added: false, reason: 'pending', jobId: enqueued.jobId, payloadTaken: false }],
    ] as const) {
      expect(await enqueuePy(h, ref, {}, { env })).toEqual(answer);
      expect(await h.engine.enqueue(ref, {})).toEqual(answer);
    }

    // nothing pending: Python adds the job, and engine.enqueue then finds it
    const sid = stageId(free);
    const added = await enqueuePy(h, free, { sceneUrl: 's3://scenes/7' }, { env, extra: ['--build-id', 'b7'] });
    expect(added).toEqual({ added: true, reason: null, jobId: expect.any(String), payloadTaken: true });
    expect(Object.keys(added).sort()).toEqual(Object.keys(enqueued).sort());
    const jobId = added.jobId as string;
    expect(jobId).toMatch(/^book-1\/a%2Fb\/image%20\(hd\)!@r\.[0-9a-z]{12,}$/);
    expect(await h.engine.enqueue(free, {})).toEqual({ added: false, reason: 'pending', jobId, payloadTaken: false });

    // laid out as BullMQ's own add lays out the engine's job: BullMQ reads it back with the contract's options
    const job = (await h.engine.queue.getJob(jobId))!;
    expect(await job.getState()).toBe('waiting');
    expect({ name: job.name, data: job.data, opts: job.opts, deduplicationId: job.deduplicationId }).toEqual({
      name: free.stage,
      data: { v: 1, scope: free.scope, stage: free.stage, payload: { sceneUrl: 's3://scenes/7' }, buildId: 'b7' },
      opts: {
        jobId,
        deduplication: { id: sid },
        attempts: 3,
        backoff: { type: 'exponential', delay: 1000 },
        removeOnComplete: true,
      },
      deduplicationId: sid,
    });
    const base = `${h.prefix}:${h.queueName}:`;
    const [mine, bullmqs] = await Promise.all([h.redis.hgetall(base + jobId), h.redis.hgetall(base + enqueued.jobId)]);
    expect(Object.keys(mine).sort()).toEqual(Object.keys(bullmqs).sort());
    const stored = (fields: Record<string, string>) => ({ ...JSON.parse(fields.opts!), jobId: 0, de: 0 });
    expect(stored(mine)).toEqual(stored(bullmqs));
    // its job timestamp is Redis' time, not the producer's clock an hour ahead
    expect(Math.abs(Number(mine.timestamp) - Number(time[0]) * 1000)).toBeLessThan(60_000);
    // its events are BullMQ's: added and waiting, then deduplicated when an add meets it
    const events = (await h.redis.xrange(base + 'events', '-', '+')).map(([, f]) =>
      f.map((x, i) => (f[i - 1] === 'deduplicatedJobId' ? '<the add>' : x)),
    );
    const of = (id: string) => events.filter((f) => f[3] === id).map((f) => f.join(' '));
    expect(of(jobId)).toEqual([
      `event added jobId ${jobId} name ${free.stage}`,
      `event waiting jobId ${jobId}`,
      `event deduplicated jobId ${jobId} deduplicationId ${sid} deduplicatedJobId <the add>`,
    ]);
    // (the waiting stage's job: BullMQ's add, then Python's add and the engine's met it)
    const theirs = of(enqueued.jobId!);
    expect(theirs).toHaveLength(4);
    expect(theirs[2]).toBe(theirs[3]);

    hold.open();
    await running;
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.some((d) => d.id === jobId), "the Python producer's job to complete");
    expect(done.find((d) => d.id === jobId)!.result).toMatchObject({ dispatched: true });
    expect(h.executor.callsOf(free).map((c) => c.payload)).toEqual([{ sceneUrl: 's3://scenes/7' }]);
    expect(failed).toEqual([]);
  }, 60_000);

  it('C19: copied out of the package, the Python producer runs given the probe file, and without it says where it looked and how to pass it', async () => {
    const h = harness();
    mkdirSync(join(tmp, 'app'));
    const file = join(tmp, 'app', 'bullmq_stage_deferral.py');
    copyFileSync(PRODUCER, file);
    const where = join(tmp, 'src', 'lua', 'enqueue-probe.lua');
    expect(await enqueuePy(h, free, null, { file, cwd: tmp })).toEqual({
      code: 2,
      stderr: expect.stringContaining(
        `FileNotFoundError: The enqueue probe is not at ${where}: pass \`probe_path\` (--probe-file)`,
      ),
    });
    expect(await h.redis.exists(`${h.prefix}:${h.queueName}:de:${stageId(free)}`)).toBe(0);
    const added = await enqueuePy(h, free, null, { file, cwd: tmp, extra: ['--probe-file', PROBE] });
    expect(added).toMatchObject({ added: true, reason: null });
    const { done } = watch(h.engine.createWorker());
    await waitFor(() => done.some((d) => d.id === added.jobId), 'the job to complete');
    expect(h.executor.callsFor(free)).toBe(1);
  }, 30_000);
});
