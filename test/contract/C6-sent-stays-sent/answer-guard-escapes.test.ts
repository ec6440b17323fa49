import { harness, SENT } from '../../helpers/engine';
import { sleep } from '../../helpers/jobs';
import { settledOnce, viaJob } from '../../helpers/runs';
import type { ExecutorResult, StageRef } from '../../../src';

/**
 * Commit 994478d reads the executor's answer once, "each field in a guard"
 * (`readAnswer`, src/dispatch.ts), and an answer saying `dispatched: true` stands as a dispatch
 * whatever else is wrong with it. But the guard is not total: what the engine does with a value
 * to DESCRIBE the problem can itself throw, and that throw escapes `checkExecutorResult` inside
 * the executor's try in `Dispatcher.locked`, where it is taken for the executor's own error
 * (`executor_error`, a real failure): BullMQ retries the job and the executor sends the stage
 * again; a direct `dispatchStage` rejects though the stage went out.
 *  - readAnswer's catch builds `${key}: ${error?.message}`: a thrown value whose `message` is a
 *    Symbol or an object with no string form (a null-prototype object) makes the template throw;
 *  - checkExecutorResult's `shown(r.jobs)` (JSON, then String) throws for a `jobs` that neither
 *    can convert (a revoked Proxy, a null-prototype object whose toJSON throws).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** Sent: `dispatched: true`, but reading `jobs` throws a value with a Symbol `message`. */
function sentGetterThrowsOdd(): ExecutorResult<string> {
  return {
    dispatched: true,
    reason: null,
    get jobs(): number {
      throw { message: Symbol('response closed') };
    },
  } as ExecutorResult<string>;
}

/** Sent: `dispatched: true`, `jobs` a revoked Proxy (a response object already released). */
function sentJobsRevoked(): ExecutorResult<string> {
  const p = Proxy.revocable({}, {});
  p.revoke();
  return { dispatched: true, reason: null, jobs: p.proxy } as unknown as ExecutorResult<string>;
}

describe('C6: an answer saying dispatched: true whose problem cannot be described', () => {
  it.each([
    ['a getter throwing a value whose message is a Symbol', sentGetterThrowsOdd],
    ['`jobs` a revoked Proxy (shown() throws)', sentJobsRevoked],
  ])('%s: the sent stage is retried and sent again', async (_t, answer) => {
    const { h, engineFailed } = await viaJob(image, { script: [async () => answer()], fallback: SENT }, settledOnce);
    await sleep(300);
    // the first answer said the stage went out: it stands (resultInvalid), never retried
    expect({ engineFailed, executorCalls: h.executor.calls.length }).toEqual({ engineFailed: [], executorCalls: 1 });
  });

  it.each([
    ['a getter throwing a value whose message is a Symbol', sentGetterThrowsOdd],
    ['`jobs` a revoked Proxy (shown() throws)', sentJobsRevoked],
  ])('a direct dispatchStage rejects though the answer said dispatched: %s', async (_t, answer) => {
    const h = harness();
    const invalid: string[] = [];
    h.engine.on('resultInvalid', (e) => invalid.push(e.error.code));
    h.executor.script(image, async () => answer());
    const r = await h.engine.dispatchStage(image, {}).then(
      (v) => ({ resolved: v.dispatched }),
      (e: unknown) => ({ rejected: `${(e as Error).name}: ${(e as Error).message}` }),
    );
    expect({ r, invalid }).toEqual({ r: { resolved: true }, invalid: ['INVALID_EXECUTOR_RESULT'] });
  });
});
