import { checkExecutorResult } from '../../../src/answer';
import { harness } from '../../helpers/engine';
import { fast, watch } from '../../helpers/jobs';
import { waitFor } from '../../helpers/redis';

/**
 * Pure unit tests of commit 1356aa9's promise "describing an answer must never throw"
 * (`shown` / `errorText` / readAnswer's `unreadable`, src/dispatch.ts). Each guard returns the
 * description, but the description is then put into a template literal OUTSIDE any guard:
 *  - checkExecutorResult's `\`jobs\` to be a number, got ${shown(r.jobs)}` and the
 *    InvalidExecutorResultError message;
 *  - readAnswer's catch: `unreadable ??= \`${key}: threw ${errorText(error)}\``.
 * A description at V8's maximum string length (2^29 - 24 characters; a rope from `repeat`
 * costs nothing to make) makes that concatenation throw RangeError "Invalid string length".
 * The RangeError escapes checkExecutorResult for an answer that says `dispatched: true`:
 * Dispatcher.attempt's catch (src/dispatch.ts ~289) takes it for the executor's own throw,
 * `executor_error`, a real failure: BullMQ retries the job and the stage is SENT AGAIN.
 */
const HUGE = () => 'x'.repeat(2 ** 29 - 24);

const outcome = (answer: unknown) => {
  try {
    const { raw, invalid } = checkExecutorResult(answer);
    return { dispatched: raw.dispatched, invalid: invalid?.name };
  } catch (error) {
    return { threw: `${(error as Error).name}: ${(error as Error).message}` };
  }
};

describe('C6: describing a bad answer of a sent stage throws after all', () => {
  it('dispatched: true with a `jobs` whose String() is at the maximum string length makes checkExecutorResult throw RangeError', () => {
    const jobs = {
      toJSON() {
        throw new Error('not JSON');
      },
      toString: HUGE,
    };
    expect(outcome({ dispatched: true, jobs, reason: null })).toEqual({
      dispatched: true,
      invalid: 'InvalidExecutorResultError',
    });
  });

  it('dispatched: true with a `jobs` getter that throws an Error of the maximum message length makes checkExecutorResult throw RangeError', () => {
    const answer = {
      dispatched: true,
      reason: null,
      get jobs(): number {
        throw new Error(HUGE());
      },
    };
    expect(outcome(answer)).toEqual({ dispatched: true, invalid: 'InvalidExecutorResultError' });
  });
});

describe('C6: through a worker (Redis)', () => {
  it('a sent stage whose answer has a `jobs` getter throwing an Error of the maximum message length is sent again by the retry', async () => {
    const image = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
    const h = harness({ retry: { attempts: 3, backoff: fast } });
    h.executor.script(image, async () => ({
      dispatched: true as const,
      reason: null,
      get jobs(): number {
        throw new Error(HUGE());
      },
    }));
    h.executor.fallback = { dispatched: true, jobs: 1, reason: null };
    const worker = h.engine.createWorker();
    worker.on('error', () => undefined);
    const { done, failed } = watch(worker);
    await h.engine.enqueue(image, {});
    await waitFor(() => done.length >= 1 || failed.length >= 1, 'the job settled', 8000);
    // the stage said dispatched: true once: it is sent once (a resultInvalid, no failure, no retry)
    expect({ executorCalls: h.executor.calls.length, failed: failed.length }).toEqual({ executorCalls: 1, failed: 0 });
  });
});

describe('C6: a not-sent answer whose retryAfterMs cannot be compared', () => {
  it('a capacity answer with retryAfterMs: Symbol() throws TypeError from the `>= 0` test, not INVALID_EXECUTOR_RESULT', () => {
    const r = outcome({ dispatched: false, jobs: 0, reason: 'no_worker_available', retryAfterMs: Symbol('later') });
    expect(r).toEqual({ threw: expect.stringContaining('InvalidExecutorResultError') });
  });

  it('a non-capacity answer with retryAfterMs: Symbol() throws TypeError, though retryAfterMs "is read only for a capacity outcome"', () => {
    const r = outcome({ dispatched: false, jobs: 0, reason: 'boom', retryAfterMs: Symbol('later') });
    expect(r).toEqual({ dispatched: false, invalid: undefined });
  });
});
