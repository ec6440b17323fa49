import { harness, SENT } from '../../helpers/engine';
import { sleep } from '../../helpers/jobs';
import { settledOnce, viaJob } from '../../helpers/runs';
import type { ExecutorResult, StageRef } from '../../../src';

/**
 * a fix: an answer that says `dispatched: true` stands as a
 * dispatch whatever else it got wrong ("a sent stage is never retried"; `resultInvalid`). But the
 * engine reads the answer's fields more than once, outside any guard: `checkExecutorResult` reads
 * `jobs` (`typeof r.jobs`) inside the executor's try, so a field that throws when read is taken
 * for the EXECUTOR's error (reason `executor_error`, a real failure: BullMQ retries the job, the
 * executor sends the stage again); and `locked`/`sent` read `raw.jobs` again for the `dispatched`
 * event after the release, where a throw escapes the attempt (the job's processor throws: BullMQ
 * retries and sends again; a direct call rejects with an untyped error though the stage went out).
 * An answer of a host's own class (a getter computing `jobs` from a response that a later read
 * finds consumed), or a Proxy around a response object, does this.
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** `dispatched: true`, `reason: null`, and `jobs` a getter that answers `okReads` times, then throws. */
function sentWithJobsGetter(okReads: number): ExecutorResult<string> {
  let reads = 0;
  return {
    dispatched: true,
    reason: null,
    get jobs(): number {
      if (reads++ >= okReads) throw new Error('response body already consumed');
      return 1;
    },
  } as ExecutorResult<string>;
}

describe('C6: an answer saying dispatched: true whose `jobs` throws when read', () => {
  it('`jobs` a getter that throws: the sent stage stands (resultInvalid), sent once', async () => {
    let sends = 0;
    const sent = async () => {
      sends++; // the executor sent the stage downstream, then answered
      return sentWithJobsGetter(0);
    };
    const { h, failed, engineFailed } = await viaJob(image, { script: [sent], fallback: SENT }, settledOnce);
    await sleep(300);
    expect({
      engineFailed,
      bullFailed: failed.length,
      executorCalls: h.executor.calls.length,
    }).toEqual({ engineFailed: [], bullFailed: 0, executorCalls: 1 });
    expect(sends).toBe(1);
  });

  it('`jobs` reads fine once, then throws: read once only, the job completes, sent once', async () => {
    const { h, failed } = await viaJob(
      image,
      { script: [async () => sentWithJobsGetter(1)], fallback: SENT },
      { ended: ({ done }) => done.length >= 1, what: 'the job completed', timeoutMs: 8000 },
    );
    await sleep(300);
    // one call: the first answer said the stage was sent
    expect({ executorCalls: h.executor.calls.length, bullFailed: failed.length }).toEqual({
      executorCalls: 1,
      bullFailed: 0,
    });
  });

  it('a direct dispatchStage whose answer says dispatched: true resolves dispatched, though a getter throws on a second read', async () => {
    const h = harness();
    h.executor.script(image, async () => sentWithJobsGetter(1));
    const r = await h.engine.dispatchStage(image, {}).then(
      (v) => ({ resolved: v.dispatched }),
      (e: unknown) => ({ rejected: (e as Error).message }),
    );
    expect(r).toEqual({ resolved: true });
  });
});
