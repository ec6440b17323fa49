import { execFile } from 'node:child_process';
import { createDispatchEngine, type DispatchEngine, type ExecutorResult, type StageRef } from '../../src';
import { buildOnce } from '../helpers/build';
import { closeFileEngine, fileEngine } from '../helpers/engine';
import { client, dropPrefix, isolated, waitFor } from '../helpers/redis';
import { CLI, cliOn, type Run } from './run';

const { prefix, queueName } = isolated();

/** Runs the built bin as a child process against the test Redis, on this test's queue. */
function cli(...args: string[]): Promise<Run> {
  return cliOn({ prefix, queueName }, ...args);
}

const NO_WORKER: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'no_worker_available' };
const DONE: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'already_completed' };

const image1: StageRef = { scope: ['book-1', 'ch-1', 'sc-1'], stage: 'image' };
const video1: StageRef = { scope: ['book-1', 'ch-1', 'sc-1'], stage: 'video' };
const image2: StageRef = { scope: ['book-1', 'ch-2', 'sc-1'], stage: 'image' };
const odd: StageRef = { scope: ['book/2', 'ch:1'], stage: 'img\\x' };
const other: StageRef = { scope: ['book-9'], stage: 'image' };

let engine: DispatchEngine;

beforeAll(async () => {
  buildOnce();
  // by hand, not harness(): one engine fills the queue the CLI binary reads, for every test of the file
  engine = fileEngine(
    { prefix, queueName },
    {
      // windows long enough to outlast the test; nothing runs a worker here
      windows: { capacitySeconds: 300, idempotentSeconds: 600, jitter: 0 },
      jobLog: true, // `show` prints the wake-up's log
      executor: async (ref) => (ref.stage === 'video' ? DONE : NO_WORKER),
    },
  );
  for (const ref of [image1, video1, image2, odd, other]) {
    const r = await engine.dispatchStage(ref, { n: 1 });
    expect(r.dispatched).toBe(false);
  }
  await engine.dispatchStage(image1, { n: 1 }, { force: true }); // suppressed: no second deferral
}, 120_000);

afterAll(() => closeFileEngine(engine, prefix));

describe('C29: list', () => {
  it('prints every deferred stage as a table with reason, class, deferrals and until', async () => {
    const r = await cli('list');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^STAGE\s+CLASS\s+REASON\s+DEFERRALS\s+UNTIL\s+IN$/);
    expect(lines).toHaveLength(6);
    expect(r.stdout).toMatch(/book-1\/ch-1\/sc-1:image\s+capacity\s+no_worker_available\s+1\s+\d{4}-\d\d-\d\dT/);
    expect(r.stdout).toMatch(/book-1\/ch-1\/sc-1:video\s+idempotent\s+already_completed\s+1\s/);
    expect(r.stdout).toContain('book\\/2/ch\\:1:img\\\\x');
  });

  it('narrows to a scope prefix, one argument per segment', async () => {
    const r = await cli('--json', 'list', 'book-1', 'ch-1');
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.stdout) as { ref: string; reason: string; until: string; remainingMs: number }[];
    expect(rows.map((x) => x.ref).sort()).toEqual(['book-1/ch-1/sc-1:image', 'book-1/ch-1/sc-1:video']);
    const until = Date.parse(rows[0]!.until);
    expect(until).toBeGreaterThan(Date.now());
    expect(rows[0]!.remainingMs).toBeGreaterThan(0);
  });

  it('says so when nothing is deferred in the scope', async () => {
    const r = await cli('list', 'book-404');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('No deferred stages under book-404');
  });
});

describe('C29: show', () => {
  it('shows a deferred stage, its wake-up job and its log', async () => {
    const r = await cli('show', 'book-1/ch-1/sc-1:image');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/state\s+deferred/);
    expect(r.stdout).toMatch(/reason\s+no_worker_available/);
    expect(r.stdout).toMatch(/wake-up job\s+book-1\/ch-1\/sc-1\/image@cap\.1\./);
    expect(r.stdout).toMatch(/log:\n {2}\S+ deferred #1 \(capacity\): no_worker_available/);
  });

  it('takes the ref as --scope/--stage, and escaped characters in the ref text', async () => {
    const a = JSON.parse(
      (await cli('--json', 'show', '--scope', 'book/2', '--scope', 'ch:1', '--stage', 'img\\x')).stdout,
    );
    const b = JSON.parse((await cli('--json', 'show', 'book\\/2/ch\\:1:img\\\\x')).stdout);
    expect(a).toMatchObject({ state: 'deferred', scope: ['book/2', 'ch:1'], stage: 'img\\x', class: 'capacity' });
    expect(b.wakeUpJobId).toBe(a.wakeUpJobId);
  });

  it('reports a stage with no deferral as idle, exit 3 (nothing known of it: a typo?)', async () => {
    const r = await cli('--json', 'show', 'book-1/ch-1/sc-9:image');
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ state: 'idle', stageId: 'book-1/ch-1/sc-9/image' });
  });
});

describe('C29: cancel and clear', () => {
  it('cancel ends one deferral and removes its wake-up', async () => {
    expect(await engine.isStageDeferred(other)).toBe(true);
    const r = await cli('--json', 'cancel', 'book-9:image');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ref: 'book-9:image', hadDeferral: true, removedJobs: 1 });
    expect(await engine.isStageDeferred(other)).toBe(false);
  });

  it('clear ends every deferral under the scope and nothing outside it', async () => {
    const r = await cli('clear', 'book-1', 'ch-1');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Woke 2 deferred stages under book-1/ch-1');
    await waitFor(async () => !(await engine.isStageDeferred(image1)), 'image1 cleared');
    expect(await engine.isStageDeferred(video1)).toBe(false);
    expect(await engine.isStageDeferred(image2)).toBe(true);
    // what is left outside book-1/ch-1 (book-9:image too, unless the cancel test ran first)
    const left = JSON.parse((await cli('--json', 'list')).stdout) as { ref: string }[];
    expect(
      left
        .map((x) => x.ref)
        .filter((ref) => ref !== 'book-9:image')
        .sort(),
    ).toEqual(['book-1/ch-2/sc-1:image', 'book\\/2/ch\\:1:img\\\\x']);
  });

  it('show reports a cleared stage as pending, with its promoted job waiting for a worker', async () => {
    // cleared here too, so the test runs alone (a second clear finds nothing, exit 3, and changes nothing)
    expect([0, 3]).toContain((await cli('clear', 'book-1', 'ch-1')).code);
    const r = await cli('--json', 'show', 'book-1/ch-1/sc-1:image');
    expect(r.code).toBe(0);
    const info = JSON.parse(r.stdout);
    expect(info).toMatchObject({ state: 'pending', jobState: 'waiting' });
    expect(info.jobId).toMatch(/^book-1\/ch-1\/sc-1\/image@cap\.1\./);
  });
});

describe('C29: a stage whose wake-up failed for good', () => {
  const own = isolated();
  let e: DispatchEngine;
  afterAll(async () => {
    await e?.close();
    await dropPrefix(client(), own.prefix);
  });

  it('show reports it failed, with the job and its error', async () => {
    let calls = 0;
    // by hand, not harness(): its teardown would close the client this file's shared engine runs on
    e = createDispatchEngine<unknown, string>({
      connection: client(),
      ...own,
      windows: { capacitySeconds: 0.1 },
      retry: { attempts: 1 },
      executor: async () => (++calls === 1 ? NO_WORKER : { dispatched: false, jobs: 0, reason: 'gpu_on_fire' }),
    });
    await e.dispatchStage({ scope: ['book-7'], stage: 'image' }, null);
    e.createWorker();
    await waitFor(async () => (await e.queue.getFailedCount()) === 1, 'the wake-up to fail');
    const r = await cliOn(own, '--json', 'show', 'book-7:image');
    expect(r.code).toBe(0);
    const info = JSON.parse(r.stdout);
    expect(info).toMatchObject({ state: 'failed', jobState: 'failed' });
    expect(info.jobId).toMatch(/^book-7\/image@cap\.1\./);
    expect(info.failedReason).toMatch(/gpu_on_fire/);
  });
});

describe('C29: bad input', () => {
  const cases: [string[], RegExp][] = [
    [['show', 'image'], /expected its id as job ids show it/],
    [['show', 'book-1//x:image'], /`scope\[1\]` to be non-empty/],
    [['show', 'a\\q:image'], /backslash must be followed by/],
    [['show', 'a:image', '--stage', 'video'], /either as <ref> or as --scope\/--stage/],
    [['show'], /Missing the stage/],
    [['cancel', 'a/b/c/d/e/f/g/h/i:image'], /1 to 8 segments, got 9/],
    [['clear'], /missing required argument 'scope'/],
    [['frobnicate'], /unknown command 'frobnicate'/],
    [['--queue', 'a:b', 'list'], /`queueName`: must not contain `:`/],
  ];

  it('refuses each bad command line with a clear message and exit code 2', async () => {
    const runs = await Promise.all(cases.map(([args]) => cli(...args)));
    runs.forEach((r, i) => {
      const [args, message] = cases[i]!;
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 2, stdout: '' });
      expect({ args, stderr: r.stderr }).toEqual({ args, stderr: expect.stringMatching(message) });
    });
  });

  it('refuses an unknown queue instead of creating it', async () => {
    const r = await cli('--queue', `${queueName}-typo`, 'list');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`No BullMQ queue "${queueName}-typo"`);
    expect(await client().exists(`${prefix}:${queueName}-typo:meta`)).toBe(0);
  });

  it('exits 1 with the cause when Redis does not answer', async () => {
    const r = await new Promise<Run>((resolve) =>
      execFile(process.execPath, [CLI, '--redis', 'redis://127.0.0.1:1', 'list'], (error, stdout, stderr) =>
        resolve({ code: typeof error?.code === 'number' ? error.code : 0, stdout, stderr, ms: 0 }),
      ),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Cannot connect to Redis at redis:\/\/127\.0\.0\.1:1.*ECONNREFUSED/);
  });
});
