import type { ExecutorResult, StageRef } from '../../../src';
import { InvalidExecutorResultError } from '../../../src/errors';
import { harness, notSent, SENT } from '../../helpers/engine';
import { viaJob } from '../../helpers/runs';

/**
 * The contract's "a real failure still uses the normal retry budget", from
 * the other side: an attempt whose executor sent the stage is never turned
 * into a failure afterwards, since BullMQ's retry of the job would send the
 * stage again. a check found two ways it was: an answer
 * `dispatched: true` with a field of the wrong shape (a `retryAfterMs` the
 * executor could not parse: NaN), and an answer JSON cannot hold (a BigInt,
 * a cycle), which made BullMQ's completion of the job throw.
 */
const image: StageRef = { scope: ['book-s', 'ch-1'], stage: 'image' };
/**
 * One enqueued job run to its end with `answer` as every executor answer (viaJob), and its counts: executor
 * calls, completed and failed jobs (`ONCE` when the stage was sent once and the job completed).
 */
async function runWith(answer: unknown) {
  const run = await viaJob(image, { fallback: answer as ExecutorResult<string> });
  return {
    ...run,
    counts: { calls: run.h.executor.callsFor(image), completed: run.done.length, failed: run.failed.length },
  };
}
const ONCE = { calls: 1, completed: 1, failed: 0 };

describe('C6: a sent stage stays sent: nothing after the executor answered dispatched: true retries the job', () => {
  it.each([
    ['`jobs` not a number', { jobs: '1' }, '`jobs` to be a number, got "1"'],
    ['`jobs` a BigInt', { jobs: 1n }, '`jobs` to be a number, got 1'],
    ['`reason` a number', { reason: 5 }, '`reason` to be a string or null, got 5'],
  ])(
    'an answer dispatched: true with %s stands as a dispatch, sent once; resultInvalid names the field',
    async (_, bad, problem) => {
      const { done, counts, invalid } = await runWith({ ...SENT, ...bad });
      expect(counts).toEqual(ONCE);
      expect(done[0]!.result).toMatchObject({ dispatched: true });
      expect(invalid).toHaveLength(1);
      expect(invalid[0]!.ref).toEqual(image);
      expect(invalid[0]!.error).toBeInstanceOf(InvalidExecutorResultError);
      expect(invalid[0]!.error.message).toBe(`The executor returned an invalid result: expected ${problem}`);
    },
  );

  it.each([
    ['retryAfterMs NaN (a Retry-After header that did not parse)', { retryAfterMs: Number.NaN }],
    ['retryAfterMs -1', { retryAfterMs: -1 }],
    ['retryable a string', { retryable: 'no' }],
    ['notSent an object', { notSent: { a: 1 } }],
  ])('a dispatch does not read %s: it is not checked, and nothing is reported', async (_, extra) => {
    const { counts, invalid } = await runWith({ ...SENT, ...extra });
    expect(counts).toEqual(ONCE);
    expect(invalid).toEqual([]);
  });

  it('a direct dispatchStage whose executor sent the stage with retryAfterMs -1 answers dispatched (its caller learns it was sent)', async () => {
    const h = harness();
    h.executor.script(image, { ...SENT, retryAfterMs: -1 });
    await expect(h.engine.dispatchStage(image, {})).resolves.toMatchObject({ dispatched: true });
  });

  it.each([
    ['a BigInt (a downstream id)', { ...SENT, downstreamId: 10n }],
    [
      'a cycle (an HTTP response kept in the answer)',
      (() => {
        const res: Record<string, unknown> = { status: 201 };
        res.self = res;
        return { ...SENT, response: res };
      })(),
    ],
  ])(
    'an answer holding %s: the job completes once, its return value without the answer JSON cannot hold',
    async (_, answer) => {
      const { done, counts } = await runWith(answer);
      expect(counts).toEqual(ONCE);
      expect(done[0]!.result).toEqual({ dispatched: true, reason: null, retryable: false });
    },
  );

  it('an answer JSON can hold is kept in the job return value as before', async () => {
    const { done } = await runWith({ ...SENT, jobs: 2 });
    expect(done[0]!.result).toEqual({ dispatched: true, reason: null, retryable: false, result: { ...SENT, jobs: 2 } });
  });
});

describe('C6: retryAfterMs is read only for a capacity outcome (ignored for other outcomes)', () => {
  it('already_completed with retryAfterMs -1 defers as idempotent (the hint is not read)', async () => {
    const h = harness();
    h.executor.script(image, notSent('already_completed', { retryAfterMs: -1 }));
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: false, reason: 'already_completed' });
    expect(await h.engine.isStageDeferred(image)).toBe(true);
  });

  it('a capacity outcome with retryAfterMs NaN is INVALID_EXECUTOR_RESULT, nothing recorded', async () => {
    const h = harness();
    h.executor.script(image, notSent('no_worker_available', { retryAfterMs: Number.NaN }));
    await expect(h.engine.dispatchStage(image, {})).rejects.toMatchObject({ code: 'INVALID_EXECUTOR_RESULT' });
    expect(await h.engine.isStageDeferred(image)).toBe(false);
  });
});
