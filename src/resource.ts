/**
 * Resources: what a stage needs that a whole pool shares ("the GPU pool"). A capacity answer
 * that names one closes its gate; the names are checked here, once, and encoded for the keys.
 */
import { z } from 'zod';
import { InvalidResourceError } from './errors';

/** The longest resource name, characters. */
export const MAX_RESOURCE_LENGTH = 200;

/** A resource name: 1..200 characters of well-formed Unicode (a lone surrogate has no stable encoding). */
export const resourceName = z
  .string('a string')
  .min(1, 'a non-empty string')
  .max(MAX_RESOURCE_LENGTH, `at most ${MAX_RESOURCE_LENGTH} characters`)
  .refine(encodes, 'well-formed Unicode (no lone surrogate)');

/** Whether a name has a percent-encoding (a lone UTF-16 surrogate has none). */
function encodes(name: string): boolean {
  try {
    encodeURIComponent(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * The most stages one wake ends: a `wakeDeferred`'s `limit`, and a success's `capacityLeft`
 * (a larger count wakes this many; the successes they bring wake more). One script's work stays bounded.
 */
export const MAX_WAKE = 10_000;

/** A count of free slots a dispatched answer saw (`capacityLeft`). */
export const capacityCount = z
  .number('a number')
  .int('an integer count')
  .min(0, 'a count (>= 0)')
  .max(1_000_000, 'at most 1000000');

/** Checks a resource name (`where` names its source in the message); throws `InvalidResourceError`. */
export function checkResource(name: unknown, where: string): string {
  const parsed = resourceName.safeParse(name);
  if (!parsed.success) throw new InvalidResourceError(`${where}: expected \`resource\` ${problem(parsed.error, name)}`);
  return parsed.data;
}

/**
 * Resource names checked and encoded for the keys (`listGates`, the CLI's `gates`), before any
 * read. Array.from visits a hole as undefined, refused (map would skip it).
 */
export function encodeResources(names: readonly unknown[], where: string): string[] {
  return Array.from(names, (n) => encodeResource(checkResource(n, where)));
}

/** Checks a `capacityLeft`; throws `InvalidResourceError`. */
export function checkCapacityLeft(n: unknown, where: string): number {
  const parsed = capacityCount.safeParse(n);
  if (!parsed.success)
    throw new InvalidResourceError(`${where}: expected \`capacityLeft\` ${problem(parsed.error, n)}`);
  return parsed.data;
}

/** A resource name as its keys hold it: percent-encoded (never `:`, `{`, `}`, `@` or `/`). */
export function encodeResource(name: string): string {
  return encodeURIComponent(name);
}

/** "to be …, got …" from zod's first issue (a failed parse has one; this module sits below options.ts: no import of it). */
function problem(error: z.ZodError, value: unknown): string {
  let got: string;
  try {
    got = typeof value === 'string' ? JSON.stringify(value.slice(0, 60)) : String(value);
  } catch {
    got = typeof value;
  }
  return `to be ${error.issues[0]!.message}, got ${got}`;
}
