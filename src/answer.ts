/** An executor's answer, read once and checked at the boundary. */
import { InvalidExecutorResultError } from './errors';
import { BUILT_IN_OUTCOMES, type OutcomeTable } from './outcomes';
import { capacityCount, resourceName } from './resource';
import type { ExecutorResult } from './types';

/**
 * The reason an attempt reports: with a non-empty `notSent`, its dominant
 * reason when all are deferrable, else its most frequent non-deferrable one
 * (a real failure wins); without, the executor's `reason`.
 */
export function reportedReason(raw: ExecutorResult<string>, outcomes: OutcomeTable): string {
  // Stryker disable next-line ArrayDeclaration: equivalent: a filler's entries are strings, whose second character is never > 0: nothing is counted
  const counted = [...(raw.notSent ?? [])].filter(([, n]) => n > 0);
  if (counted.length === 0) return raw.reason ?? 'no_jobs_sent';
  const dominant = outcomes.dominant(new Map(counted));
  if (dominant) return dominant;
  const failures = counted.filter(([r]) => outcomes.classOf(r) === null).sort((a, b) => b[1] - a[1]);
  return failures[0]![0];
}

/**
 * A value as an error message shows it: JSON, or its string when JSON cannot
 * hold it (a BigInt), or `<unprintable>` (a revoked Proxy, a Symbol's
 * message): describing an answer must never throw.
 */
function shown(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    try {
      text = String(value);
    } catch {
      return '<unprintable>';
    }
  }
  return text.length > SHOWN_MAX ? `${text.slice(0, SHOWN_MAX)}…` : text;
}

/** A value's string (as a template shows it), capped, never throwing. */
function stringOf(value: unknown): string {
  try {
    const text = String(value);
    return text.length > SHOWN_MAX ? `${text.slice(0, SHOWN_MAX)}…` : text;
  } catch {
    return '<unprintable>';
  }
}

/** The longest text of a value an error message shows. */
const SHOWN_MAX = 200;

/** The fields of an answer the engine reads. */
const ANSWER_FIELDS = [
  'dispatched',
  'jobs',
  'reason',
  'retryable',
  'notSent',
  'retryAfterMs',
  'resource',
  'capacityLeft',
] as const;

/**
 * The executor's answer, read once: its own enumerable fields and the ones
 * the engine reads copied into a plain object, each read in a guard (a getter
 * or a Proxy is read once, never again). The first field that throws is named.
 */
function readAnswer(value: object): { answer: Record<string, unknown>; unreadable?: string } {
  const answer: Record<string, unknown> = {};
  let unreadable: string | undefined;
  let keys: string[] = [];
  try {
    keys = Object.keys(value);
  } catch {
    // (a Proxy that refuses to list its keys: the engine's fields are read one by one below)
  }
  const own = new Set(keys);
  for (const key of [...keys, ...ANSWER_FIELDS]) {
    if (Object.hasOwn(answer, key)) continue;
    try {
      const v = (value as Record<string, unknown>)[key];
      // a key `__proto__` (from JSON.parse) is defined as a field, never set as the copy's prototype
      if (v === undefined && !own.has(key)) continue;
      // (also a key Object.prototype has: an app may freeze it, and assignment then throws)
      if (key in Object.prototype) Object.defineProperty(answer, key, { value: v, ...FIELD });
      else answer[key] = v;
    } catch (error) {
      if ((ANSWER_FIELDS as readonly string[]).includes(key)) unreadable ??= `${key}: threw ${errorText(error)}`;
    }
  }
  return { answer, unreadable };
}

/** An own, plain data property (what assignment makes). */
const FIELD = { enumerable: true, writable: true, configurable: true } as const;

/** What a thrown value says, never throwing itself. */
function errorText(error: unknown): string {
  try {
    return error instanceof Error ? stringOf(error.message) : shown(error);
  } catch {
    return '<unprintable>';
  }
}

/**
 * Checks the executor's answer at the boundary (hand-written: this runs once
 * per dispatch), on a copy read once (`readAnswer`): the engine reads nothing
 * of the executor's object afterwards. An answer of the wrong shape is
 * `InvalidExecutorResultError`, naming the field, except when it says
 * `dispatched: true`: the stage went out, and an error would have BullMQ
 * retry the job and send it again. Such an answer stands as a dispatch, and
 * its problem is returned to be reported (`resultInvalid`). The fields only a
 * stage not sent has (`retryable`, `notSent`, `retryAfterMs`) are not read,
 * and so not checked, on a dispatch; `retryAfterMs` is read only for a
 * capacity outcome.
 */
export function checkExecutorResult(
  value: unknown,
  outcomes: OutcomeTable = BUILT_IN_OUTCOMES,
): { raw: ExecutorResult<string>; invalid?: InvalidExecutorResultError } {
  const read = typeof value === 'object' && value !== null ? readAnswer(value) : undefined;
  const r = (read ? read.answer : value) as Partial<ExecutorResult<string>> | null;
  const sent = read !== undefined && r!.dispatched === true;
  let invalid: InvalidExecutorResultError | undefined;
  try {
    const problem = answerProblem(r, read?.unreadable, sent, outcomes);
    if (problem)
      invalid = new InvalidExecutorResultError(`The executor returned an invalid result: expected ${problem}`);
  } catch {
    // describing it failed (a text past V8's longest string): still refused, or, sent, still a dispatch
    invalid = new InvalidExecutorResultError('The executor returned an invalid result that cannot be described');
  }
  if (!invalid) return { raw: r as ExecutorResult<string> };
  if (!sent) throw invalid;
  return { raw: r as ExecutorResult<string>, invalid };
}

/**
 * A `notSent` map read once into a plain copy, or what is wrong with it: each entry a reason (a
 * string) and a count (a finite number >= 0).
 */
function countsOf(notSent: unknown): Map<string, number> | string {
  if (!(notSent instanceof Map)) return '`notSent` to be a Map';
  const counts = new Map<string, number>();
  for (const [reason, n] of notSent as Map<unknown, unknown>) {
    if (typeof reason !== 'string' || typeof n !== 'number' || !(n >= 0) || !Number.isFinite(n))
      return `\`notSent\` to map reasons (strings) to counts (finite numbers >= 0), got ${shown(reason)} → ${stringOf(n)}`;
    counts.set(reason, n);
  }
  return counts;
}

/** What is wrong with an answer (its copy), or null. A stage not sent gets its `notSent` copied. */
function answerProblem(
  r: Partial<ExecutorResult<string>> | null,
  unreadable: string | undefined,
  sent: boolean,
  outcomes: OutcomeTable,
): string | null {
  if (typeof r !== 'object' || r === null) return `an object, got ${r === null ? 'null' : typeof r}`;
  if (unreadable !== undefined) return `fields that can be read, got ${unreadable}`;
  if (typeof r.dispatched !== 'boolean') return `\`dispatched\` to be a boolean, got ${shown(r.dispatched)}`;
  if (r.jobs !== undefined && typeof r.jobs !== 'number') return `\`jobs\` to be a number, got ${shown(r.jobs)}`;
  // (a dispatch may leave its reason out: it has none)
  if (r.reason !== null && typeof r.reason !== 'string' && !(sent && r.reason === undefined))
    return `\`reason\` to be a string or null, got ${shown(r.reason)}`;
  if (r.capacityLeft !== undefined && !capacityCount.safeParse(r.capacityLeft).success)
    return `\`capacityLeft\` to be a count (an integer >= 0), got ${shown(r.capacityLeft)}`;
  if (sent) return null;
  if (r.retryable !== undefined && typeof r.retryable !== 'boolean')
    return `\`retryable\` to be a boolean, got ${shown(r.retryable)}`;
  if (r.notSent !== undefined) {
    const counts = countsOf(r.notSent);
    if (typeof counts === 'string') return counts;
    // (read once: the engine reads the copy, never the executor's map again)
    r.notSent = counts;
  }
  if (r.resource !== undefined && !resourceName.safeParse(r.resource).success)
    return `\`resource\` to be a resource name (1..200 characters), got ${shown(r.resource)}`;
  // read (and so checked) only for a capacity outcome
  if (
    r.retryAfterMs !== undefined &&
    outcomes.classOf(reportedReason(r as ExecutorResult<string>, outcomes)) === 'capacity' &&
    // (Infinity is a hint too: "not for a long while", clamped to the class's maximum)
    (typeof r.retryAfterMs !== 'number' || !(r.retryAfterMs >= 0))
  )
    return `\`retryAfterMs\` to be a number of ms >= 0, got ${stringOf(r.retryAfterMs)}`;
  return null;
}
