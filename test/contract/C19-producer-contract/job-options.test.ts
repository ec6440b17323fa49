/**
 * The producer contract's checks on a job, as pure functions (no Redis): what
 * `checkJobOptions` refuses and lets through, and that `parseJobData` takes a
 * well-formed job's data as it is. these kill mutants of
 * src/job-data.ts that the Redis-level suites (producers.contract, r4)
 * reach only through a Worker. is the contract they pin.
 */
import { InvalidJobDataError, InvalidJobOptionsError, UnsupportedJobVersionError } from '../../../src/errors';
import { encodeStageKind } from '../../../src/stage-ref';
import {
  checkJobOptions,
  dispatchJobData,
  keptWhenFinished,
  parseJobData,
  wakeUpJobId,
  type JobIdentity,
} from '../../../src/job-data';
import { thrown } from '../../helpers/thrown';

const sid = 'book-1/ch-2/image';
const ready = `${sid}@r.m1abc0k2x9`;
const wake = wakeUpJobId(sid, 'capacity', { capacity: 1, idempotent: 0, failures: 0 }, Date.UTC(2030, 0, 1));

function job(id: string, opts: JobIdentity['opts'] = {}, data: JobIdentity['data'] = {}): JobIdentity {
  return { id, data, opts: { deduplication: { id: sid }, attempts: 3, ...opts } };
}

/** The error `checkJobOptions` throws, or undefined. */
function refusal(j: JobIdentity): InvalidJobOptionsError | undefined {
  return thrown(() => checkJobOptions(j, sid), InvalidJobOptionsError);
}

describe('C19: checkJobOptions, the producer contract on a job', () => {
  it('lets through a job the contract allows', () => {
    const ok: JobIdentity[] = [
      job(ready),
      job(ready, { attempts: undefined, backoff: undefined }), // no retry options: the engine's
      job(ready, { attempts: 1, backoff: { type: 'fixed', delay: 0 } }),
      job(ready, { backoff: { type: 'exponential', delay: 1000 } }),
      job(ready, { backoff: { type: 'jitter' } }), // a custom type: the Worker's backoffStrategy's
      { id: ready, deduplicationId: sid, opts: {} }, // BullMQ 6 keeps the id on the job
      job(wake, {}, { reason: 'no_worker_available' }),
      job(wake, {}, { class: 'capacity' }),
      // a flow's child with the stage's deduplication id (where BullMQ allows one on a leaf): a cancel or an enqueue finds it
      { ...job(ready), parentKey: 'bull:render:1' },
    ];
    for (const j of ok) expect({ j, refused: refusal(j)?.message }).toEqual({ j, refused: undefined });
  });

  it.each([
    ['a newline in its id', job(`${sid}\n@r.1`), /names stage id/],
    [
      'a newline in an id without `@`',
      job('by-hand\nx'),
      /was not added as a dispatch job: add dispatch jobs with `engine\.enqueue/,
    ],
    [
      'an id added by hand (no `@`)',
      job('any-id-added-by-hand', { deduplication: undefined }),
      /was not added as a dispatch job: .* retry it/,
    ],
    [
      "a job scheduler's tick",
      job('repeat:tick-image:1767225600000'),
      /is a job scheduler's tick, no dispatch job: schedule a job on a queue of your own whose processor calls `engine\.enqueue\(ref, payload\)` \(docs/,
    ],
    [
      "a flow's child (no deduplication)",
      { ...job(ready, { deduplication: undefined }), parentKey: 'bull:render:1' },
      /is a flow's child, which BullMQ cannot deduplicate, so a cancel or an enqueue could not find it while it waits: enqueue the stage from the parent's processor, or follow the engine's `dispatched` event \(docs/,
    ],
    ['an id of another suffix', job(`${sid}@x.anything`, { deduplication: undefined }), /has no dispatch job id/],
    ['an id that starts with `@`', job('@r.1'), /names stage id "", but/],
    [
      'an id naming another stage',
      job('book-1/ch-3/image@r.1'),
      /names stage id "book-1\/ch-3\/image", but .* "book-1\/ch-2\/image": the producer's stage-id encoding differs/,
    ],
    [
      'a wake-up id without wake-up data',
      job(wake, {}, {}),
      /has a wake-up id .* but no wake-up data: a producer uses `<stageId>@r\.…`/,
    ],
    ['a wake-up id with no data at all', job(wake, {}, null), /no wake-up data/],
    [
      'a ready id without deduplication',
      job(ready, { deduplication: undefined }),
      /must be added with deduplication id "book-1\/ch-2\/image" \(its stage id\), got undefined/,
    ],
    [
      'a ready id deduplicated on another id',
      job(ready, { deduplication: { id: 'other' } }),
      /deduplication id .*, got "other"/,
    ],
    [
      'a deduplication ttl',
      job(ready, { deduplication: { id: sid, ttl: 1000 } }),
      /must be added with deduplication \{ id \} only, got \{"id":"book-1\/ch-2\/image","ttl":1000\}: a key with a ttl expires/,
    ],
    ['a deduplication extend', job(ready, { deduplication: { id: sid, extend: true } }), /deduplication \{ id \} only/],
    [
      'a deduplication replace',
      job(ready, { deduplication: { id: sid, replace: true } }),
      /deduplication \{ id \} only/,
    ],
    [
      'attempts 0',
      job(ready, { attempts: 0 }),
      /`attempts` a positive integer, got 0 \(BullMQ stores 0 when a job is added without attempts/,
    ],
    ['attempts -1', job(ready, { attempts: -1 }), /`attempts` a positive integer, got -1 \(docs\//],
    ['attempts 1.5', job(ready, { attempts: 1.5 }), /got 1\.5 \(docs\//],
    ['attempts "3"', job(ready, { attempts: '3' }), /got "3" \(docs\//],
    [
      'a backoff whose type is not a name',
      job(ready, { backoff: { type: '', delay: 10 } }),
      /must have `backoff` \{ type: 'fixed' \| 'exponential', delay: ms \} or \{ type: '<your strategy's name>' \}, got \{"type":"","delay":10\}/,
    ],
    ['a backoff with a negative delay', job(ready, { backoff: { type: 'fixed', delay: -1 } }), /`backoff`/],
    [
      'a backoff delay that is not a number',
      job(ready, { backoff: { type: 'exponential', delay: '10' } }),
      /`backoff`/,
    ],
    ['a backoff without a type', job(ready, { backoff: { delay: 10 } }), /`backoff`/],
    ['a backoff given as a number', job(ready, { backoff: 10 }), /`backoff`/],
    // the licence index's marks are not in any dispatch job id
    ['an id ending in `!`', job(`${sid}@r.1!`), /has no dispatch job id/],
    ['an id ending in `?`', job('by-hand?'), /was not added as a dispatch job/],
    ['a wake-up id ending in `?`', job(`${wake}?`, {}, { reason: 'no_worker_available' }), /has no dispatch job id/],
    [
      'an id naming a stage whose id starts with this one',
      job(`${sid}x@r.1`),
      /names stage id "book-1\/ch-2\/imagex", but/,
    ],
  ])('refuses %s with INVALID_JOB_OPTIONS naming the job and the docs', (_what, j, message) => {
    const e = refusal(j);
    expect(e).toBeDefined();
    expect(e!.code).toBe('INVALID_JOB_OPTIONS');
    expect(e!.jobId).toBe(j.id);
    expect(e!.message).toMatch(message);
    expect(e!.message.startsWith(`Dispatch job ${j.id} `)).toBe(true);
    expect(e!.message.endsWith(' (docs/producers.md, "Job options")')).toBe(true);
  });
});

describe('C19: parseJobData takes well-formed data as it is', () => {
  it('a well-formed job is not copied (the hand-written check passes it; zod runs only for a malformed one)', () => {
    const ref = { scope: ['book-1', 'ch-2'], stage: 'image' };
    const base = dispatchJobData(ref, { p: 1 }, undefined);
    const wellFormed: unknown[] = [
      base,
      dispatchJobData(ref, null, 'build-7'),
      dispatchJobData(ref, 1, undefined, { reason: 'no_worker_available', class: 'capacity', deferrals: 2 }),
      dispatchJobData(ref, 'x', undefined, { reason: 'already_completed', class: 'idempotent', deferrals: 1 }),
      dispatchJobData(ref, 2, undefined, { reason: 'gate_closed', class: 'capacity', deferrals: 1, resource: 'gpu' }),
      { ...base, wakeUp: true, until: '2030-01-01T00:00:00.000Z' }, // what versions before 0.2 wrote
      { ...base, scope: ['1', '2', '3', '4', '5', '6', '7', '8'] }, // the most segments a scope may have
      { ...base, scope: ['book-1'] }, // the fewest
      { ...base, extra: 'a key the contract does not name' },
    ];
    for (const data of wellFormed) expect(parseJobData(data, 'j')).toBe(data);
  });
});

describe('C19: parseJobData refuses malformed data of this version as malformed', () => {
  it('an empty or overlong scope, an empty segment or stage: INVALID_JOB_DATA, "Malformed", not a version error', () => {
    const base = dispatchJobData({ scope: ['book-1'], stage: 'image' }, null, undefined);
    const malformed: unknown[] = [
      { ...base, scope: [] },
      { ...base, scope: ['1', '2', '3', '4', '5', '6', '7', '8', '9'] },
      { ...base, scope: ['book-1', ''] },
      { ...base, stage: '' },
      { ...base, stage: 7 },
      'not an object',
      5,
    ];
    for (const data of malformed) {
      const error = thrown(() => parseJobData(data, 'j-3'));
      expect({ data, error }).toEqual({ data, error: expect.any(InvalidJobDataError) });
      expect(error).not.toBeInstanceOf(UnsupportedJobVersionError);
      expect((error as Error).message).toMatch(/^Malformed dispatch job j-3: /);
    }
  });
});

describe('C19: encodeStageKind, the last segment of a stage id', () => {
  it('encodes a stage kind as stageId does, and refuses a bad one with INVALID_STAGE_REF', () => {
    expect(encodeStageKind('image')).toBe('image');
    expect(encodeStageKind('a/b')).toBe('a%2Fb');
    for (const bad of ['', 7, null])
      expect(() => encodeStageKind(bad)).toThrow(expect.objectContaining({ code: 'INVALID_STAGE_REF' }));
    expect(() => encodeStageKind('')).toThrow('Expected `stage` to be non-empty');
  });
});

describe('C19: keptWhenFinished: whether BullMQ keeps a job it finishes (removeOnComplete / removeOnFail)', () => {
  it.each([
    [true, false],
    [0, false],
    [{ count: 0 }, false],
    [{ age: 0 }, false],
    [{ age: -1 }, false],
    [{ age: 0, count: 5 }, false],
    [undefined, true],
    [false, true],
    [10, true],
    [{ count: 10 }, true],
    [{ age: 3600 }, true],
    [{ age: '0' }, false],
    [{ age: 0, limit: 0 }, true],
    [{ age: 0, limit: 5 }, false],
    [{ age: '' }, true],
    [{ age: ' ' }, true], // BullMQ's script reads a blank string as no number, not as 0
    [{}, true],
    [null, true],
  ])('%j -> kept %s', (remove, kept) => {
    expect(keptWhenFinished(remove)).toBe(kept);
  });
});
