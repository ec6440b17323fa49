import { InvalidStageRefError } from './errors';
import type { StageRef } from './types';

/** At most this many scope segments. */
export const MAX_SCOPE_SEGMENTS = 8;
/**
 * Upper bound on a stage id's encoded length (the percent-encoded path the
 * keys and job ids are built from). One UTF-16 unit can encode to up to 9
 * characters, so the bound is on the encoded form, not the input.
 */
export const MAX_STAGE_ID_LENGTH = 512;

/**
 * Encodes one segment so that the result never contains `/`, `@`, `:`, `{`,
 * `}`, `|` or `%`-ambiguity: `encodeURIComponent` escapes all of them, keeps
 * ASCII letters and digits readable, and is a bijection on well-formed Unicode.
 */
function encodeSegment(segment: string, what: string, i: number): string {
  try {
    return encodeURIComponent(segment);
  } catch {
    throw new InvalidStageRefError(`Expected ${label(what, i)} to be well-formed Unicode, got a lone surrogate`);
  }
}

/** How an error names a segment: `what` itself, or the `i`-th of the array `what`. Built only for an error. */
function label(what: string, i: number): string {
  return i < 0 ? what : `\`${what}[${i}]\``;
}

/** Segment `value` encoded; `what` (and index `i`, -1 for none) name it in the error. */
function checkSegment(value: unknown, what: string, i = -1): string {
  if (typeof value !== 'string') {
    throw new InvalidStageRefError(
      `Expected ${label(what, i)} to be a string, got ${value === null ? 'null' : typeof value}`,
    );
  }
  if (value.length === 0) throw new InvalidStageRefError(`Expected ${label(what, i)} to be non-empty`);
  return encodeSegment(value, what, i);
}

/**
 * Validates a ref and returns its stage id: the encoded scope segments and
 * stage joined by `/` (`book-1/ch-2/sc-7/image`). Distinct refs give distinct
 * ids (each segment encodes injectively and never contains `/`), and a scope
 * prefix of segments is a string prefix ending in `/`. Throws
 * `InvalidStageRefError` for bad input.
 */
export function stageId(ref: StageRef): string {
  if (typeof ref !== 'object' || ref === null) {
    throw new InvalidStageRefError('Expected a stage ref `{ scope: string[], stage: string }`');
  }
  // the segments are checked and joined here, without scopePath's array (this runs once per job)
  const scope = checkScope(ref.scope, 'scope', 1);
  let id = '';
  for (let i = 0; i < scope.length; i++) id += `${checkSegment(scope[i], 'scope', i)}/`;
  id += checkSegment(ref.stage, '`stage`');
  if (id.length > MAX_STAGE_ID_LENGTH) {
    throw new InvalidStageRefError(
      `Expected the encoded stage id to be at most ${MAX_STAGE_ID_LENGTH} characters, got ${id.length}`,
    );
  }
  return id;
}

/**
 * Validates a scope (or scope prefix) and returns its encoded segments.
 * `min` is 1 for a stage's scope, and for a scope prefix given to clear/list.
 */
export function scopePath(scope: unknown, what: string, min: number): string[] {
  const checked = checkScope(scope, what, min);
  // an index loop, not `map`: `map` skips the holes of a sparse array (`[, 'a']`)
  const out: string[] = [];
  for (let i = 0; i < checked.length; i++) out.push(checkSegment(checked[i], what, i));
  return out;
}

/** `scope` as an array of `min` to `MAX_SCOPE_SEGMENTS` items (not yet checked one by one). */
function checkScope(scope: unknown, what: string, min: number): unknown[] {
  if (!Array.isArray(scope)) throw new InvalidStageRefError(`Expected \`${what}\` to be an array of strings`);
  if (scope.length < min || scope.length > MAX_SCOPE_SEGMENTS) {
    throw new InvalidStageRefError(
      `Expected \`${what}\` to have ${min} to ${MAX_SCOPE_SEGMENTS} segments, got ${scope.length}`,
    );
  }
  return scope as unknown[];
}

/** The string every stage id inside `scope` starts with (`book/` for `['book']`). */
export function scopePrefix(scope: readonly string[]): string {
  const path = scopePath(scope, 'scope', 1);
  const prefix = `${path.join('/')}/`;
  // a scope can hold a stage only if its prefix leaves room for a one-character stage
  if (prefix.length + 1 > MAX_STAGE_ID_LENGTH) {
    throw new InvalidStageRefError(`Expected the encoded scope to be at most ${MAX_STAGE_ID_LENGTH} characters`);
  }
  return prefix;
}

/** Inverse of `stageId`. */
export function parseStageId(id: string): StageRef {
  const parts = id.split('/').map((part) => decodeURIComponent(part));
  const stage = parts.pop() as string;
  return { scope: parts, stage };
}

/** The stage id a job id (`<stageId>@<suffix>`) belongs to. */
export function stageIdOfJobId(jobId: string): string {
  const at = jobId.indexOf('@');
  return at < 0 ? jobId : jobId.slice(0, at);
}

/** The encoded stage kind, as the last segment of its stages' ids (`InvalidStageRefError` for bad input). */
export function encodeStageKind(stage: unknown): string {
  return checkSegment(stage, '`stage`');
}
