import type { ExecutorResult } from '../../../src';
import { InvalidExecutorResultError } from '../../../src/errors';
import { harness, notSent } from '../../helpers/engine';

/**
 * The executor's answer as the engine reads it (src/dispatch.ts: `checkExecutorResult`,
 * `reportedReason`): a result of the wrong shape is refused by its class and whole message,
 * naming the field; the reason an attempt reports is the dominant `notSent` reason when all
 * its counted reasons are deferrable, else its most frequent real failure.
 */
const image = { scope: ['book-r', 'ch-1'], stage: 'image' };
const said = (problem: string) => `The executor returned an invalid result: expected ${problem}`;
const ok: ExecutorResult<string> = { dispatched: true, jobs: 1, reason: null };
/** A capacity outcome: every field is read, so every field is checked. */
const no: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'no_worker_available' };

describe('C22: INVALID_EXECUTOR_RESULT: a result of the wrong shape, named field by field', () => {
  it.each([
    ['null', null, 'an object, got null'],
    ['a string', 'sent', 'an object, got string'],
    ['dispatched not a boolean', { ...ok, dispatched: 'yes' }, '`dispatched` to be a boolean, got "yes"'],
    ['jobs not a number', { ...no, jobs: '1' }, '`jobs` to be a number, got "1"'],
    ['reason a number', { ...no, reason: 5 }, '`reason` to be a string or null, got 5'],
    ['reason missing', { dispatched: false, jobs: 0 }, '`reason` to be a string or null, got undefined'],
    ['retryable not a boolean', { ...no, retryable: 'no' }, '`retryable` to be a boolean, got "no"'],
    ['notSent not a Map', { ...no, notSent: { a: 1 } }, '`notSent` to be a Map'],
    ['retryAfterMs negative', { ...no, retryAfterMs: -1 }, '`retryAfterMs` to be a number of ms >= 0, got -1'],
    ['retryAfterMs NaN', { ...no, retryAfterMs: NaN }, '`retryAfterMs` to be a number of ms >= 0, got NaN'],
    ['retryAfterMs a string', { ...no, retryAfterMs: '5' }, '`retryAfterMs` to be a number of ms >= 0, got 5'],
  ])('%s', async (_, answer, problem) => {
    let calls = 0;
    // its own executor: a scripted one takes null for "no answer scripted"
    const h = harness({ executor: async () => (calls++ === 0 ? (answer as never) : ok) });
    const error = await h.engine.dispatchStage(image, {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidExecutorResultError);
    expect((error as Error).message).toBe(said(problem));
    // the stage is released: the next call goes through
    expect((await h.engine.dispatchStage(image, {})).dispatched).toBe(true);
  });

  it.each([
    ['retryable a boolean', { ...ok, retryable: false }],
    ['notSent a Map', { ...ok, notSent: new Map<string, number>() }],
    ['retryAfterMs 0', { ...ok, retryAfterMs: 0 }],
  ])('accepts %s', async (_, answer) => {
    const h = harness();
    h.executor.script(image, answer);
    expect(await h.engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
  });
});

describe('C22: the reason an attempt reports (its notSent counts)', () => {
  it.each([
    [
      'no counted reason: the executor’s own',
      notSent('no_worker_available', { notSent: new Map([['send_failed', 0]]) }),
      'no_worker_available',
    ],
    [
      'no counted reason and none of its own',
      { dispatched: false, jobs: 0, reason: null, notSent: new Map() },
      'no_jobs_sent',
    ],
    [
      'real failures: the most frequent',
      notSent('no_jobs_sent', {
        notSent: new Map([
          ['no_worker_available', 5],
          ['send_failed', 1],
          ['timeout', 2],
        ]),
      }),
      'timeout',
    ],
    [
      'a real failure counted 0 does not count',
      notSent('no_jobs_sent', {
        notSent: new Map([
          ['send_failed', 0],
          ['ambiguous_post', 1],
        ]),
      }),
      'ambiguous_post',
    ],
  ] as const)('%s', async (_, answer, reason) => {
    const h = harness();
    h.executor.script(image, answer as ExecutorResult<string>);
    expect((await h.engine.dispatchStage(image, {})).reason).toBe(reason);
  });
});
