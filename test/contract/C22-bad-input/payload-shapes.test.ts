import { harness, notSent, teardown } from '../../helpers/engine';
import { waitFor } from '../../helpers/redis';
import { payloadThroughWakeUp } from '../../helpers/runs';
import type { StageRef } from '../../../src';
import { watch } from '../../helpers/jobs';

/**
 * Contract: bad input gets a typed error before anything is written.
 * checkPayload only asks JSON.stringify not to throw: a Map, a Set, a Date,
 * NaN, undefined members pass, and the executor gets a different payload
 * after a wake-up than on the first call. buildId is not checked at all, and
 * the job data schema rejects it later, on the worker, as INVALID_JOB_DATA.
 */
afterEach(async () => {
  jest.restoreAllMocks();
  await teardown();
});

const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

describe('C22: payloads JSON does not round-trip', () => {
  it.each([
    ['a Map', { m: new Map([['a', 1]]) }],
    ['a Set', { s: new Set([1, 2]) }],
    ['NaN', { n: Number.NaN }],
    ['a Date', { d: new Date(0) }],
  ])('%s: refused up front, or the wake-up gets the same payload as the first call', async (_what, payload) => {
    const r = await payloadThroughWakeUp(image, payload);
    if ('refused' in r) {
      expect(r.refused).toMatchObject({ code: 'INVALID_PAYLOAD' });
      return;
    }
    expect(r.woken).toEqual(r.first);
  });
});

describe('C22: buildId is not validated', () => {
  it('enqueue with a non-string buildId: a typed error before anything is written', async () => {
    const h = harness();
    let threw: unknown;
    let jobId: string | undefined;
    try {
      jobId = (await h.engine.enqueue(image, {}, { buildId: 42 as unknown as string })).jobId;
    } catch (e) {
      threw = e;
    }
    if (threw) return expect(threw).toHaveProperty('code');
    // nothing refused it: the job was written, and fails for good on the worker
    const { failed } = watch(h.engine.createWorker());
    await waitFor(() => failed.length === 1, 'the job failed');
    expect({ jobId, error: failed[0]!.error.message }).toBeUndefined();
  });

  it('a deferral made with a non-string buildId: its wake-up fails for good as INVALID_JOB_DATA', async () => {
    const h = harness({ windows: { capacitySeconds: 0.05, jitter: 0 } });
    h.executor.script(image, notSent('no_worker_available'));
    let threw: unknown;
    try {
      await h.engine.dispatchStage(image, {}, { buildId: 7 as unknown as string });
    } catch (e) {
      threw = e;
    }
    if (threw) return expect(threw).toHaveProperty('code');
    const { done, failed } = watch(h.engine.createWorker());
    await waitFor(() => done.length + failed.length === 1, 'the wake-up ran');
    expect(failed.map((f) => f.error.message)).toEqual([]);
  });
});
