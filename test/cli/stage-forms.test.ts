import type { DispatchEngine, ExecutorResult, StageRef } from '../../src';
import { buildOnce } from '../helpers/build';
import { closeFileEngine, fileEngine } from '../helpers/engine';
import { isolated } from '../helpers/redis';
import { cliOn } from './run';

/**
 * A stage as the operator has it at hand: its id as Bull Board's job ids show it
 * (`book-1/ch-2/image`, a wake-up's whole id too) or the CLI's `book-1/ch-2:image`; a stage or
 * scope that matches nothing (a typo) is exit 3 with a line that says so; `clear --dry-run`
 * lists what a clear would wake, and a clear of a whole book wants `--yes`.
 */
const names = isolated();
const NO_WORKER: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'no_worker_available' };
const image: StageRef = { scope: ['book-1', 'ch-2'], stage: 'image' };
const video: StageRef = { scope: ['book-1', 'ch-2'], stage: 'video' };
const odd: StageRef = { scope: ['book 3', 'ch/4'], stage: 'image' };
let engine: DispatchEngine;
const cli = (...args: string[]) => cliOn(names, ...args);

beforeAll(async () => {
  buildOnce();
  engine = fileEngine(names, { windows: { capacitySeconds: 300, jitter: 0 }, executor: async () => NO_WORKER });
  for (const ref of [image, video, odd]) await engine.dispatchStage(ref, {});
}, 120_000);

afterAll(() => closeFileEngine(engine, names.prefix));

describe('C29: a stage as job ids show it, or in the CLI form', () => {
  it('show takes book-1/ch-2/image, a wake-up job id, and book-1/ch-2:image alike', async () => {
    const [wakeUp] = (await engine.listDeferred(['book-1', 'ch-2'])).filter((d) => d.ref.stage === 'image');
    for (const form of ['book-1/ch-2/image', wakeUp!.wakeUpJobId, 'book-1/ch-2:image']) {
      const r = await cli('--json', 'show', form);
      expect({ form, code: r.code }).toEqual({ form, code: 0 });
      expect(JSON.parse(r.stdout)).toMatchObject({ state: 'deferred', stageId: 'book-1/ch-2/image' });
    }
  });

  it('a percent-encoded id reads back its segments; a bad escape or a lone segment is exit 2', async () => {
    const r = await cli('--json', 'show', 'book%203/ch%2F4/image');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ scope: odd.scope, stage: 'image', state: 'deferred' });
    const bad = await cli('show', 'book-1/%E0%A4%A/image');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/bad %-escape/);
    const lone = await cli('show', 'image');
    expect(lone.code).toBe(2);
    expect(lone.stderr).toMatch(/as job ids show it, `book-1\/ch-2\/sc-7\/image`/);
  });
});

describe('C29: a stage or scope that matches nothing is exit 3', () => {
  it.each([
    [['show', 'book-1/ch-2/imge'], /Nothing is known of book-1\/ch-2:imge/],
    [['cancel', 'book-1/ch-2/imge'], /Nothing to cancel for book-1\/ch-2:imge/],
    [['wake', '--stage', 'imge'], /No capacity-deferred stage matched/],
    [['clear', 'book-9', 'ch-1'], /No deferred stage under book-9\/ch-1/],
  ])('%j', async (args, message) => {
    const r = await cli(...args);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(message);
    // nothing of the real stages changed
    expect(await engine.isStageDeferred(image)).toBe(true);
  });
});

describe('C29: clear --dry-run, and a whole book wants --yes', () => {
  it('--dry-run lists the stages a clear would wake and changes nothing', async () => {
    const r = await cli('--json', 'clear', 'book-1', '--dry-run');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      scope: ['book-1'],
      wouldWake: ['book-1/ch-2:image', 'book-1/ch-2:video'],
      more: false,
    });
    expect(await engine.isStageDeferred(image)).toBe(true);
    expect(await engine.isStageDeferred(video)).toBe(true);
  });

  it('a clear of a whole book without --yes is refused (exit 2) before anything changes; with --yes it wakes', async () => {
    const refused = await cli('clear', 'book-1');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--dry-run, then confirm with --yes/);
    expect(await engine.isStageDeferred(image)).toBe(true);
    const done = await cli('clear', 'book-1', '--yes');
    expect(done.code).toBe(0);
    expect(done.stdout).toContain('Woke 2 deferred stages under book-1');
    expect(await engine.isStageDeferred(image)).toBe(false);
    expect(await engine.isStageDeferred(odd)).toBe(true);
  });
});
