import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { stageId } from '../../../src';
import { harness, notSent, SENT } from '../../helpers/engine';
import { latch, watch } from '../../helpers/jobs';
import { onCluster, waitFor } from '../../helpers/redis';

/**
 * a producer in Python (examples/python/enqueue.py, Debian's
 * python3-redis under /usr/bin/python3) against the published contract:
 * test/python/test_vectors.py checks its encoder against the vectors and runs
 * the shipped probe on stages this engine deferred, holds in flight or has
 * pending; the job it builds is added by examples/python/add-job.ts (BullMQ's
 * add) and dispatched by the engine's worker.
 */
const ROOT = join(__dirname, '..', '..', '..');
const PYTHON = '/usr/bin/python3';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Runs a command to its end (killed after 30 s) with `input` on its stdin. */
function run(
  cmd: string,
  args: string[],
  env: Record<string, string>,
  input = '',
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env } });
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
    child.stdin.end(input);
  });
}

const deferred = { scope: ['book-1', "it's (1)", 'caf\u00e9'], stage: '📚' };
const inFlight = { scope: ['book-1', 'ch-2'], stage: 'image*' };
const pending = { scope: ['book-1', 'ch-3'], stage: 'a b+c' };
const waiting = { scope: ['book-1', 'ch-4'], stage: '~video' };
const free = { scope: ['book-1', 'a/b'], stage: 'image (hd)!' };

(onCluster ? describe.skip : describe)('C19: a Python producer', () => {
  it('the vectors hold in Python, and without Redis it says how many it checked', async () => {
    const r = await run(PYTHON, ['test/python/test_vectors.py'], {});
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(r.stdout)).toEqual({ ok: true, valid: 26, invalid: 16, quoteDiffers: 5, probes: 0 });
  });

  it('the shipped probe run from Python answers for real deferrals; its job is added and dispatched', async () => {
    const h = harness({ windows: { capacitySeconds: 30, idempotentSeconds: 120, jitter: 0 } });
    // deferred: a capacity deferral of a ref with the characters encoders disagree on
    h.executor.script(deferred, notSent('no_worker_available'));
    expect(await h.engine.dispatchStage(deferred, {})).toMatchObject({
      reason: 'no_worker_available',
      until: expect.any(Number),
    });
    // pending: a deferral whose marker was deleted by hand; its wake-up is licensed and delayed
    const wakeUps: string[] = [];
    h.engine.on('deferred', (e) => wakeUps.push(e.wakeUpJobId));
    h.executor.script(pending, notSent('no_worker_available'));
    await h.engine.dispatchStage(pending, {});
    await h.redis.del(`${h.prefix}:${h.queueName}:sd:deferred:${stageId(pending)}`);
    // waiting: enqueued, no worker yet (no licence: BullMQ's deduplication holds it)
    const enqueued = await h.engine.enqueue(waiting, {});
    // in flight: a dispatch whose executor has not answered yet
    const hold = latch();
    h.executor.script(inFlight, async () => {
      await hold.opened;
      return SENT;
    });
    const running = h.engine.dispatchStage(inFlight, {});
    await waitFor(() => h.executor.callsFor(inFlight) === 1, 'the dispatch in flight');

    const cases = {
      redis: REDIS_URL,
      prefix: h.prefix,
      queue: h.queueName,
      cases: [
        { ...deferred, expect: 'deferred', windowMs: 30_000 },
        { ...inFlight, expect: 'in_flight' },
        { ...pending, expect: 'pending', jobId: wakeUps[0] },
        { ...waiting, expect: 'add' },
        { ...free, expect: 'add' },
      ],
      add: [
        { ...free, payload: { sceneUrl: 's3://scenes/7' } },
        { ...waiting, payload: {} },
      ],
    };
    const py = await run(PYTHON, ['test/python/test_vectors.py'], { PROBE_CASES: JSON.stringify(cases) });
    hold.open();
    await running;
    expect({ code: py.code, stderr: py.stderr }).toEqual({ code: 0, stderr: '' });
    const report = JSON.parse(py.stdout) as { ok: boolean; probes: number; add: Record<string, unknown>[] };
    expect(report).toMatchObject({ ok: true, probes: 5 });

    // the jobs Python built keep the contract: id, deduplication id, retry options, name
    const sid = stageId(free);
    expect(sid).toBe('book-1/a%2Fb/image%20(hd)!');
    expect(report.add[0]).toEqual({
      name: free.stage,
      data: { v: 1, scope: free.scope, stage: free.stage, payload: { sceneUrl: 's3://scenes/7' } },
      opts: {
        jobId: expect.stringMatching(/^book-1\/a%2Fb\/image%20\(hd\)!@r\.[0-9a-z]{12,}$/),
        deduplication: { id: sid },
        attempts: 3,
        backoff: { type: 'exponential', delay: 1000 },
        removeOnComplete: true,
      },
    });

    // BullMQ's add in Node: the free stage's job is added, the waiting stage's meets its deduplication key
    const input = report.add.map((job) => JSON.stringify({ add: job })).join('\n');
    const add = await run(
      'npx',
      ['tsx', 'examples/python/add-job.ts', '--prefix', h.prefix, '--queue', h.queueName],
      { REDIS_URL },
      input,
    );
    expect(add.code).toBe(0);
    expect(
      add.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual([
      { added: true, jobId: (report.add[0]!.opts as { jobId: string }).jobId },
      { added: false, jobId: enqueued.jobId },
    ]);

    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.some((d) => d.id.startsWith(`${sid}@r.`)), "the Python producer's job to complete");
    expect(done.find((d) => d.id.startsWith(`${sid}@r.`))!.result).toMatchObject({ dispatched: true });
    expect(h.executor.callsOf(free).map((c) => c.payload)).toEqual([{ sceneUrl: 's3://scenes/7' }]);
    expect(failed).toEqual([]);
  }, 60_000);
});
