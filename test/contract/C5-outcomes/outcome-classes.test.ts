import {
  classifyNotSentReasons,
  deferralWindowFor,
  DEFERRED_IDEMPOTENT_TTL_S,
  DEFERRED_STAGE_TTL_S,
  isCapacityOutcome,
  isDeferrableOutcome,
  isIdempotentOutcome,
} from '../../../src';

describe('C5: outcome classes', () => {
  it.each(['no_worker_available', 'duplicate_pending', 'ambiguous_post'])('%s is capacity and deferrable', (r) => {
    expect(isCapacityOutcome(r)).toBe(true);
    expect(isIdempotentOutcome(r)).toBe(false);
    expect(isDeferrableOutcome(r)).toBe(true);
    expect(deferralWindowFor(r)).toBe(DEFERRED_STAGE_TTL_S);
  });

  it('already_completed is idempotent, deferrable, with its own longer window', () => {
    expect(isIdempotentOutcome('already_completed')).toBe(true);
    expect(isCapacityOutcome('already_completed')).toBe(false);
    expect(isDeferrableOutcome('already_completed')).toBe(true);
    expect(deferralWindowFor('already_completed')).toBe(DEFERRED_IDEMPOTENT_TTL_S);
  });

  it.each(['no_jobs_sent', 'no_jobs_generated', 'send_failed', 'already_ready', 'circuit_open', 'something_new', ''])(
    '%s is not deferrable (immediate-retry contract)',
    (r) => {
      expect(isDeferrableOutcome(r)).toBe(false);
      expect(deferralWindowFor(r)).toBeNull();
    },
  );

  it('defaults: capacity window in 1..600 s, idempotent window at least twice it', () => {
    expect(DEFERRED_STAGE_TTL_S).toBeGreaterThanOrEqual(1);
    expect(DEFERRED_STAGE_TTL_S).toBeLessThanOrEqual(600);
    expect(DEFERRED_IDEMPOTENT_TTL_S).toBeGreaterThanOrEqual(2 * DEFERRED_STAGE_TTL_S);
  });
});

describe('C5: classifyNotSentReasons', () => {
  const m = (entries: [string, number][]) => new Map(entries);

  it('returns the dominant reason when all are deferrable', () => {
    expect(
      classifyNotSentReasons(
        m([
          ['duplicate_pending', 2],
          ['no_worker_available', 5],
        ]),
      ),
    ).toBe('no_worker_available');
    expect(
      classifyNotSentReasons(
        m([
          ['already_completed', 3],
          ['ambiguous_post', 1],
        ]),
      ),
    ).toBe('already_completed');
  });

  it('returns null when any reason is not deferrable (a real failure wins)', () => {
    expect(
      classifyNotSentReasons(
        m([
          ['no_worker_available', 9],
          ['send_failed', 1],
        ]),
      ),
    ).toBeNull();
    expect(classifyNotSentReasons(m([['unknown_reason', 1]]))).toBeNull();
  });

  it('returns null for an empty map', () => {
    expect(classifyNotSentReasons(new Map())).toBeNull();
  });

  it('breaks a tie by the order the classes are listed', () => {
    expect(
      classifyNotSentReasons(
        m([
          ['ambiguous_post', 2],
          ['no_worker_available', 2],
        ]),
      ),
    ).toBe('no_worker_available');
    expect(
      classifyNotSentReasons(
        m([
          ['already_completed', 2],
          ['duplicate_pending', 2],
        ]),
      ),
    ).toBe('duplicate_pending');
    expect(
      classifyNotSentReasons(
        m([
          ['already_completed', 4],
          ['ambiguous_post', 4],
          ['duplicate_pending', 4],
        ]),
      ),
    ).toBe('duplicate_pending');
  });
});
