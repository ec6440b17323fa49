import type { OutcomeClass } from './types';

/** Outcomes meaning "nothing can take this stage now". Order breaks ties. */
export const CAPACITY_OUTCOMES = ['no_worker_available', 'duplicate_pending', 'ambiguous_post'] as const;
/** Outcomes meaning "the logical task is already done". */
export const IDEMPOTENT_OUTCOMES = ['already_completed'] as const;

/**
 * Default capacity window, seconds. A scheduler ticking every 5 s sees 6 ticks
 * suppressed per window, and a freed GPU slot waits at most 30 s to be used.
 */
export const DEFERRED_STAGE_TTL_S = 30;
/**
 * Default idempotent window, seconds (10 x capacity): an "already done" answer
 * rarely changes, so re-asking often is pure churn.
 */
export const DEFERRED_IDEMPOTENT_TTL_S = 300;

const PRECEDENCE: readonly string[] = [...CAPACITY_OUTCOMES, ...IDEMPOTENT_OUTCOMES];

export function isCapacityOutcome(reason: string | null | undefined): boolean {
  return (CAPACITY_OUTCOMES as readonly string[]).includes(reason as string);
}

export function isIdempotentOutcome(reason: string | null | undefined): boolean {
  return (IDEMPOTENT_OUTCOMES as readonly string[]).includes(reason as string);
}

export function isDeferrableOutcome(reason: string | null | undefined): boolean {
  return isCapacityOutcome(reason) || isIdempotentOutcome(reason);
}

/** The class of a deferrable outcome, `null` for any other reason. */
export function outcomeClass(reason: string | null | undefined): OutcomeClass | null {
  if (isCapacityOutcome(reason)) return 'capacity';
  if (isIdempotentOutcome(reason)) return 'idempotent';
  return null;
}

/** Default window in seconds for a deferrable outcome, `null` otherwise. */
export function deferralWindowFor(reason: string): number | null {
  const cls = outcomeClass(reason);
  if (cls === 'capacity') return DEFERRED_STAGE_TTL_S;
  if (cls === 'idempotent') return DEFERRED_IDEMPOTENT_TTL_S;
  return null;
}

/**
 * The dominant not-sent reason of one attempt: the one with the highest count
 * when every reason with a positive count is deferrable; `null` when any is not
 * (a real failure wins) or none has a positive count. Ties go to the reason
 * listed first in CAPACITY_OUTCOMES then IDEMPOTENT_OUTCOMES.
 */
export function classifyNotSentReasons(notSent: ReadonlyMap<string, number>): string | null {
  let best: string | null = null;
  let bestCount = 0;
  for (const [reason, count] of notSent) {
    if (!(count > 0)) continue;
    if (!isDeferrableOutcome(reason)) return null;
    const better =
      count > bestCount ||
      (count === bestCount && best !== null && PRECEDENCE.indexOf(reason) < PRECEDENCE.indexOf(best));
    if (better) {
      best = reason;
      bestCount = count;
    }
  }
  return best;
}
