import { dispatched, noCapacity, type DispatchEngine, type StageRef } from '../../src';
import { buildOnce } from '../helpers/build';
import { closeFileEngine, fileEngine } from '../helpers/engine';
import { client, dropPrefix, isolated } from '../helpers/redis';
import { cliOn } from './run';

/** `gates [resource…]`: each resource's gate and how many stages are in its line. */
const names = isolated();
const bare = isolated();
let engine: DispatchEngine;
let plain: DispatchEngine;
const gpu = (n: number): StageRef => ({ scope: ['book-1', `sc-${n}`], stage: 'image' });
const farm: StageRef = { scope: ['book-2'], stage: 'video' };

beforeAll(async () => {
  buildOnce();
  // by hand, not harness(): one engine fills the queue the CLI binary reads, for every test of the file
  engine = fileEngine(names, {
    resourceOf: (ref) => (ref.stage === 'image' ? 'gpu pool' : 'render/farm'),
    executor: async () => noCapacity(),
  });
  // 'gpu pool': closed for the capacity window (5 minutes), two stages in its line
  await engine.dispatchStage(gpu(1), {});
  expect(await engine.dispatchStage(gpu(2), {})).toMatchObject({ reason: 'gate_closed' });
  // 'render/farm': closed, then opened by a wake (its woken stage stays in the line until it is done)
  await engine.dispatchStage(farm, {});
  expect((await engine.wakeDeferred({ resource: 'render/farm', limit: 1 })).woken).toEqual([farm]);
  // 'tpu': a probe in flight for a minute, nothing in its line
  const [sec] = await client().time();
  await client().set(`${names.prefix}:${names.queueName}:sd:gate:tpu`, `p${Number(sec) * 1000 + 60_000}`);
  // a dispatch queue whose stages need no resource
  plain = fileEngine(bare, { executor: async () => dispatched(1) });
  await plain.dispatchStage(gpu(1), {});
}, 120_000);

afterAll(async () => {
  await plain.close();
  await dropPrefix(client(), bare.prefix);
  await closeFileEngine(engine, names.prefix);
});

describe('C29: the CLI gates command', () => {
  it("prints each resource's gate, until when, and how many stages are in its line", async () => {
    const r = await cliOn(names, 'gates');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^RESOURCE\s+GATE\s+UNTIL\s+IN\s+WAITING$/);
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(/^gpu pool\s+closed\s+\d{4}-\d\d-\d\dT\S+\s+(4m\d\ds|5m00s)\s+2$/),
      expect.stringMatching(/^render\/farm\s+open\s+-\s+-\s+1$/),
      expect.stringMatching(/^tpu\s+probing\s+\d{4}-\d\d-\d\dT\S+\s+\d+\.\ds\s+0$/),
    ]);
  });

  it('narrows to the named resources; --json prints the same facts', async () => {
    const r = await cliOn(names, '--json', 'gates', 'gpu pool');
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.stdout) as { remainingMs: number }[];
    expect(rows).toEqual([
      {
        resource: 'gpu pool',
        gate: 'closed',
        until: expect.stringMatching(/Z$/),
        remainingMs: expect.any(Number),
        waiting: 2,
      },
    ]);
    expect(rows[0]!.remainingMs).toBeGreaterThan(200_000);
  });

  it('a resource with no gate and no line matches nothing: exit 3, saying so', async () => {
    const r = await cliOn(names, 'gates', 'gpu pool', 'gpu-pol');
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/^RESOURCE/);
    expect(r.stderr).toBe(
      `No gate and no line for "gpu-pol" (queue "${names.queueName}", prefix "${names.prefix}"): a typo, or nothing waits on it\n`,
    );
    const none = await cliOn(bare, 'gates');
    expect(none).toMatchObject({ code: 3, stdout: '' });
    expect(none.stderr).toMatch(/^No resource has a gate or a line \(queue /);
  });

  it('an empty resource name is bad input (exit 2)', async () => {
    const r = await cliOn(names, 'gates', '');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/expected `resource` to be a non-empty string/);
  });
});
