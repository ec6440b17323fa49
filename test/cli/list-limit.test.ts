import type { DispatchEngine } from '../../src';
import { buildOnce } from '../helpers/build';
import { closeFileEngine, fileEngine } from '../helpers/engine';
import { isolated } from '../helpers/redis';
import { cliOn } from './run';

/** Check of the CLI's `list` page shares the engine's bounds. */
const names = isolated();
let engine: DispatchEngine;

beforeAll(async () => {
  buildOnce();
  // by hand, not harness(): one engine makes the queue the CLI binary reads
  engine = fileEngine(names);
  await engine.dispatchStage({ scope: ['book-1'], stage: 'image' }, {});
}, 120_000);

afterAll(() => closeFileEngine(engine, names.prefix));

describe('C29: CLI list --limit', () => {
  it('list --limit above 10,000 is a usage error (exit 2), as listDeferred rejects it, not an unbounded page', async () => {
    const r = await cliOn(names, 'list', '--limit', '10001');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--limit/);
    // the bound itself is a page
    const ok = await cliOn(names, '--json', 'list', '--limit', '10000');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ nextCursor: null, stages: [{ ref: 'book-1:image' }] });
  });
});
