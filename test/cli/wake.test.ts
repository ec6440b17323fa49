import type { DispatchEngine, StageRef } from '../../src';
import { buildOnce } from '../helpers/build';
import { closeFileEngine, fileEngine } from '../helpers/engine';
import { isolated } from '../helpers/redis';
import { cliOn } from './run';

/** `wake [scope…] --stage S --limit N` (with `--json`). */
const names = isolated();
let engine: DispatchEngine;
const refs: StageRef[] = [
  { scope: ['book-1'], stage: 'image' },
  { scope: ['book-1'], stage: 'video' },
  { scope: ['book-2'], stage: 'image' },
];

beforeAll(async () => {
  buildOnce();
  // by hand, not harness(): one engine fills the queue the CLI binary reads, for every test of the file
  engine = fileEngine(names);
  for (const ref of refs) await engine.dispatchStage(ref, {});
}, 120_000);

afterAll(() => closeFileEngine(engine, names.prefix));

describe('C29: the CLI wake command', () => {
  it('wakes the filtered stages, longest-waiting first, and prints them (--json)', async () => {
    const r = await cliOn(names, '--json', 'wake', '--stage', 'image', '--limit', '5');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ woken: [refs[0], refs[2]] });
    expect(await engine.isStageDeferred(refs[1]!)).toBe(true);
  });

  it('a table by default; a bad --limit is a usage error (exit 2)', async () => {
    const r = await cliOn(names, 'wake', 'book-1');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Woke 1 stage/);
    expect(r.stdout).toMatch(/book-1:video/);
    expect((await cliOn(names, 'wake', '--limit', '0')).code).toBe(2);
  });
});
