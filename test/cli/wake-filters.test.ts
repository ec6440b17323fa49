import { main } from '../../src/cli';
import type { StageRef } from '../../src';
import { harness, notSent } from '../helpers/engine';
import { REDIS_URL } from './run';

/**
 * The CLI's `wake` (src/cli.ts), run in-process through `main` (no build).
 * `--stage ''` is dropped by `...(opts.stage ? { stage } : {})`: an empty kind (an unset
 * shell variable, `wake --stage "$KIND"`) silently becomes "any kind", where `show`,
 * `cancel` and `engine.wakeDeferred({ stage: '' })` all refuse an empty stage.
 */
const image: StageRef = { scope: ['book-1'], stage: 'image' };
const video: StageRef = { scope: ['book-1'], stage: 'video' };

async function cli(on: { prefix: string; queueName: string }, ...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const o = jest.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  const e = jest.spyOn(process.stderr, 'write').mockImplementation((s) => (err.push(String(s)), true));
  try {
    const code = await main(['--redis', REDIS_URL, '--queue', on.queueName, '--prefix', on.prefix, ...args]);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

describe('C29: CLI wake', () => {
  it("wake --stage '' is a usage error and wakes nothing", async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(video, {});
    const r = await cli(h, '--json', 'wake', '--stage', '', '--limit', '5');
    // the engine refuses an empty kind (INVALID_STAGE_REF): the CLI should too (exit 2), and wake nothing
    expect({ code: r.code, video: await h.engine.isStageDeferred(video) }).toEqual({ code: 2, video: true });
  });

  it('--json prints { woken: StageRef[] } in order; --limit 10001 is a usage error; an odd kind is matched exactly', async () => {
    const h = harness({ windows: { capacitySeconds: 300, jitter: 0 } });
    h.executor.fallback = notSent('no_worker_available');
    const odd: StageRef = { scope: ['book-1'], stage: 'a/b:c %2F' };
    const lookalike: StageRef = { scope: ['book-1'], stage: 'a%2Fb:c %2F' };
    for (const s of [image, odd, lookalike]) await h.engine.dispatchStage(s, {});
    expect((await cli(h, 'wake', '--limit', '10001')).code).toBe(2);
    const r = await cli(h, '--json', 'wake', '--stage', 'a/b:c %2F', '--limit', '5');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ woken: [odd] });
    expect(await h.engine.isStageDeferred(lookalike)).toBe(true);
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });
});
