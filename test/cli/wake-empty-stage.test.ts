import { main } from '../../src/cli';
import { harness, notSent } from '../helpers/engine';
import { onCluster, redisOptions } from '../helpers/redis';
import type { StageRef } from '../../src';

/**
 * `wake --stage <kind>` builds its filter with
 * `...(opts.stage ? { stage: opts.stage } : {})` (src/cli.ts, the wake
 * action): an empty `--stage` (`--stage "$KIND"` with KIND unset) is dropped,
 * and the command wakes the longest-waiting stages of EVERY kind, exit 0.
 * The API refuses the same filter (`wakeDeferred({ stage: '' })`:
 * INVALID_STAGE_REF), and so do the CLI's other commands (`cancel --stage ''`:
 * exit 2).
 */
const image: StageRef = { scope: ['book-1', 'ch-1'], stage: 'image' };

/** Runs the CLI in this process; returns its exit code and what it printed. */
async function cli(args: string[]) {
  const out: string[] = [];
  const o = jest.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  const e = jest.spyOn(process.stderr, 'write').mockImplementation((s) => (out.push(String(s)), true));
  try {
    const { host, port } = redisOptions();
    return { code: await main(['--redis', `redis://${host}:${port}`, ...args]), out: out.join('') };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

(onCluster ? describe.skip : describe)('C29: the CLI wake command with an empty --stage', () => {
  it('wake --stage "" is a usage error (exit 2) and wakes nothing', async () => {
    const h = harness();
    h.executor.fallback = notSent('no_worker_available');
    await h.engine.dispatchStage(image, {});
    await expect(h.engine.wakeDeferred({ stage: '' })).rejects.toMatchObject({ code: 'INVALID_STAGE_REF' });
    const r = await cli(['--queue', h.queueName, '--prefix', h.prefix, 'wake', '--stage', '', '--json']);
    expect({ code: r.code, stillDeferred: await h.engine.isStageDeferred(image) }).toEqual({
      code: 2,
      stillDeferred: true,
    });
  });
});
