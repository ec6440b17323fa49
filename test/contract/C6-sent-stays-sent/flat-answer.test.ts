import { MAX_STORED_ANSWER, returnValueFor } from '../../helpers/answers';
import type { DispatchResult, ExecutorResult } from '../../../src';

/**
 * Pure unit tests (no Redis) of commit a51e08d's `isFlat` (src/bullmq/processor.ts):
 * an answer whose copy holds only strings, finite numbers, booleans and null is returned as the
 * job's return value as it is, without `storable`'s JSON round trip. The processor is driven by
 * a fake dispatcher whose attempt returns the engine's copy of an executor answer
 * (`checkExecutorResult`), as `Dispatcher.attempt` does for a dispatch.
 */
/** What the job's return value was before a51e08d: the answer's JSON, parsed (or left out). */
function roundTrip(result: DispatchResult): DispatchResult {
  const { result: answer, ...rest } = result;
  const json = JSON.stringify(answer);
  if (json === undefined || json.length > MAX_STORED_ANSWER) return rest;
  return { ...rest, result: JSON.parse(json) as ExecutorResult<string> };
}

describe('C6: the job return value of a flat answer (isFlat skips the JSON round trip)', () => {
  it('a flat answer with a key of 2 M characters goes through the cap (left out of the return value)', async () => {
    const answer = { dispatched: true, jobs: 1, reason: null, ['k'.repeat(2_000_000)]: null };
    const rv = await returnValueFor(answer);
    // storable's doc: the answer is "left out when ... it is over 1 MiB of JSON"; isFlat counts
    // only string VALUES, never keys, so BullMQ writes 2 MB of JSON into the job's hash
    expect(JSON.stringify(rv.result ?? null).length).toBeLessThanOrEqual(MAX_STORED_ANSWER);
  });

  it('a flat answer of 100 000 numeric fields (~3 MB of JSON) goes through the cap', async () => {
    const answer: Record<string, unknown> = { dispatched: true, jobs: 1, reason: null };
    for (let i = 0; i < 100_000; i++) answer[`metric_${i}`] = 1.234567890123456e-300 * (i + 1);
    expect(JSON.stringify(answer).length).toBeGreaterThan(2 * MAX_STORED_ANSWER);
    const rv = await returnValueFor(answer);
    // past isFlat's 64 fields: the JSON round trip and its cap apply
    expect(JSON.stringify(rv.result ?? null).length).toBeLessThanOrEqual(MAX_STORED_ANSWER);
  });

  it('jobs: -0 is stored as the JSON round trip gives it, 0', async () => {
    const answer = { dispatched: true, jobs: -0, reason: null };
    const rv = await returnValueFor(answer);
    // a Worker's `completed` listener gets this value in-process; getJob/QueueEvents read 0 from Redis
    expect(rv).toEqual(roundTrip(rv));
  });

  it('a flat answer with own constructor / toJSON / hasOwnProperty / toString / __proto__ keys set to primitives is returned as its JSON round trip gives it', async () => {
    const answer = JSON.parse(
      '{"dispatched":true,"jobs":1,"reason":null,"constructor":"c","toJSON":"t","hasOwnProperty":1,"toString":false,"valueOf":null,"__proto__":"p"}',
    ) as ExecutorResult<string>;
    const rv = await returnValueFor(answer);
    const expected = roundTrip({ dispatched: true, reason: null, retryable: false, result: answer });
    expect(JSON.stringify(rv)).toBe(JSON.stringify(expected));
    expect(Object.keys(rv.result!)).toEqual(Object.keys(expected.result!));
    expect(Object.getPrototypeOf(rv.result)).toBe(Object.prototype);
    for (const key of ['constructor', 'toJSON', 'hasOwnProperty', 'toString', 'valueOf', '__proto__'])
      expect([key, Object.hasOwn(rv.result!, key)]).toEqual([key, true]);
  });

  it('a flat answer with strings needing \\u escapes stays under the cap (6 JSON chars each, the cap is length / 8)', async () => {
    const answer = { dispatched: true, jobs: 1, reason: null, s: '\u0001'.repeat(MAX_STORED_ANSWER / 8 - 1) };
    const rv = await returnValueFor(answer);
    expect(JSON.stringify(rv.result).length).toBeLessThanOrEqual(MAX_STORED_ANSWER);
  });
});
