import { harness, SENT } from '../helpers/engine';
import { waitFor } from '../helpers/redis';
import { fast, sleep, watch } from '../helpers/jobs';
import type { ExecutorResult, StageRef } from '../../src';

/**
 * Review 16c. An executor's answer is checked (`checkExecutorResult`) for its
 * fields' types, not for surviving JSON. The processor returns the
 * DispatchResult, which carries the executor's raw answer (`result: raw`), as
 * the job's return value; BullMQ's moveToCompleted JSON.stringify()s it. An
 * answer holding a BigInt (a downstream id) or a cycle (an HTTP response
 * object) makes the completion throw AFTER the stage was sent: BullMQ fails
 * the attempt and retries the job, whose begin finds no lock, licence or
 * marker, and sends the stage again (and again, until the budget is spent).
 */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

async function run(answer: ExecutorResult) {
  const h = harness({ retry: { attempts: 3, backoff: fast } });
  h.executor.fallback = answer;
  const { done, failed } = watch(h.engine.createWorker());
  await h.engine.enqueue(image, { sceneUrl: 'u' });
  await waitFor(
    () => done.length + failed.filter((f) => f.error.name === 'UnrecoverableError').length >= 1 || failed.length >= 3,
    'the job settled',
  );
  await sleep(300); // let a retry (10 ms backoff) run, if there is one
  return { h, done, failed };
}

describe('review 16c: an executor answer that does not survive JSON', () => {
  it.each([
    ['a BigInt', { ...SENT, downstreamId: 10n } as unknown as ExecutorResult],
    [
      'a cycle (e.g. an HTTP response kept in the answer)',
      (() => {
        const res: Record<string, unknown> = { status: 201 };
        res.self = res;
        return { ...SENT, response: res } as unknown as ExecutorResult;
      })(),
    ],
  ])(
    'DEFECT (doubled dispatch): a dispatched answer holding %s is sent ONCE, not once per BullMQ retry',
    async (_n, answer) => {
      const { h, failed } = await run(answer);
      // the stage was sent by the first call; every further call is a duplicate dispatch
      expect({ calls: h.executor.callsFor(image), failures: failed.map((f) => f.error.message) }).toEqual({
        calls: 1,
        failures: [],
      });
    },
  );

  it('PASSING CHECK: a direct dispatchStage answer holding a BigInt is returned as is (no JSON on that path)', async () => {
    const h = harness();
    h.executor.fallback = { ...SENT, downstreamId: 10n } as unknown as ExecutorResult;
    const r = await h.engine.dispatchStage(image, {});
    expect(r.dispatched).toBe(true);
  });
});
