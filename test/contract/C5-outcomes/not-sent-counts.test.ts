import { InvalidExecutorResultError, type StageRef } from '../../../src';
import { harness } from '../../helpers/engine';

/**
 * CheckExecutorResult (src/dispatch.ts) promises: "An answer of the wrong shape is
 * `InvalidExecutorResultError`, naming the field". For `notSent` it checks `instanceof Map`
 * only; its counts are read later, outside the check, by `reportedReason` (first line of
 * `Dispatcher.notSent`): `n > 0` on a Symbol, and `sort((a, b) => b[1] - a[1])` on BigInt counts
 * (a count straight from a database driver's bigint) throw a bare TypeError. A direct
 * `dispatchStage` rejects with that TypeError (no code, nothing naming `notSent`); a job fails
 * with it. (Nothing is sent, so nothing is sent twice: an unclear error for bad input.)
 */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

const answerWith = (notSent: Map<unknown, unknown>) => ({
  dispatched: false,
  jobs: 0,
  reason: null,
  notSent: notSent as Map<string, number>,
});

async function thrownBy(notSent: Map<unknown, unknown>): Promise<string> {
  const h = harness();
  h.executor.script(image, answerWith(notSent));
  try {
    await h.engine.dispatchStage(image, {});
    return 'resolved';
  } catch (e) {
    return e instanceof InvalidExecutorResultError && e.message.includes('`notSent`')
      ? 'InvalidExecutorResultError naming notSent'
      : `${(e as Error).name}: ${(e as Error).message}`;
  }
}

describe('C5: notSent counts of the wrong type', () => {
  it('an executor answer whose notSent counts are BigInts (two failure reasons) is InvalidExecutorResultError naming notSent (was a bare TypeError)', async () => {
    expect(
      await thrownBy(
        new Map([
          ['gpu_oom', 2n],
          ['bad_input', 1n],
        ]),
      ),
    ).toBe('InvalidExecutorResultError naming notSent');
  });

  it('an executor answer whose notSent count is a Symbol is InvalidExecutorResultError naming notSent (was a bare TypeError)', async () => {
    expect(await thrownBy(new Map([['no_worker_available', Symbol('n')]]))).toBe(
      'InvalidExecutorResultError naming notSent',
    );
  });
});
