import { jobIdOfLicence, parseLicence } from '../job-data';
import { parseStageId, stageIdOfJobId } from '../stage-ref';
import type { DeferredStage, OutcomeClass } from '../types';
import type { StoreKeys } from './keys';
import { readFields, type Cmd, type Reader } from './reader';

/** One deferred stage as the views show it, from its wake-up's id, its marker's TTL and a few data fields. */
export function deferredStage(
  id: string,
  pttl: number,
  fields: { reason?: string; class?: string; deferrals?: number; resource?: string },
  now: number,
): DeferredStage {
  const lic = parseLicence(id);
  const cls = (fields.class ?? lic?.cls ?? 'capacity') as OutcomeClass;
  return {
    ref: parseStageId(stageIdOfJobId(id)),
    reason: fields.reason ?? 'unknown',
    class: cls,
    // the window's end as the deferral recorded it (its id holds it, on Redis' clock: the same
    // for every host and tool); from the marker's TTL for an id of another form
    until: lic ? lic.until : now + Math.max(0, pttl),
    deferrals: fields.deferrals ?? (lic ? lic.chain[cls] : 0),
    wakeUpJobId: id,
    ...(fields.resource === undefined ? {} : { resource: fields.resource }),
  };
}

export interface Page {
  stages: DeferredStage[];
  /** Where the next page starts (pass it back as `cursor`); null when the listing is complete. */
  nextCursor: string | null;
}

/** The largest page `listDeferred` and the CLI's `list` serve. */
export const MAX_PAGE = 10_000;

/** Whether `cursor` can be a `nextCursor` of the listing under `prefix`: the last licence a page read, in the scope. */
export function isCursorOf(prefix: string, cursor: unknown): cursor is string {
  return typeof cursor === 'string' && cursor.startsWith(prefix) && cursor.includes('@');
}

/** Licences one round reads at most (one `ZRANGEBYLEX … LIMIT`, then one pipeline per round). */
const ROUND = 500;
/** Licences the first round reads at least (doubling each round, within the budget): a sparse index costs a few rounds, not one per stage. */
const MIN_ROUND = 100;
/** A page reads at most this many licences per stage asked for (and at least `MIN_SCAN`), as `SCAN` bounds its work. */
const SCAN_FACTOR = 10;
const MIN_SCAN = 1000;

/** The stage id of a licence member: the part before its first `@` (also for a `<stage id>@j.<job id>` member). */
const stageOfMember = (member: string) => member.slice(0, member.indexOf('@'));

/**
 * The members among `members` whose stage is deferred by them (its marker names the member's job,
 * and that wake-up job exists: a marker whose wake-up is gone defers nothing), with their index.
 */
async function deferredOf(reader: Reader, keys: Pick<StoreKeys, 'marker' | 'job'>, members: readonly string[]) {
  const ids = members.map(jobIdOfLicence);
  const markers = await reader.run(
    members.flatMap((m, at): Cmd[] => [
      ['get', keys.marker(stageOfMember(m))],
      ['pttl', keys.marker(stageOfMember(m))],
      ['exists', keys.job(ids[at]!)],
    ]),
  );
  return ids
    .map((id, at) => ({
      id,
      at,
      marker: markers[3 * at] as string | null,
      pttl: Number(markers[3 * at + 1]),
      exists: Number(markers[3 * at + 2]) === 1,
    }))
    .filter((r) => r.marker === r.id && r.pttl >= 0 && r.exists);
}

/**
 * The deferred stages under a stage-id prefix, read from the licence index in
 * rounds (an index range, never a scan of the keyspace): all of them, or one
 * page of at most `limit` after `cursor`. A licence whose stage is not
 * deferred (its wake-up pending, cleared, failed) is skipped. A page's work is
 * bounded like `SCAN`'s: it reads at most `max(10 × limit, 1000)` licences
 * (and the rest of its last stage's members), so it can hold fewer than
 * `limit` stages (even none) with a cursor to go on from; the listing is
 * complete when `nextCursor` is null. A page ends on a stage: the next one
 * starts after every member of the cursor's stage, so a stage deferred again
 * between two pages (its new licence sorts after the old one) is not listed
 * twice. Memory and time per page do not grow with the number of stages outside it.
 */
export async function listStages(
  reader: Reader,
  keys: Pick<StoreKeys, 'index' | 'marker' | 'job'>,
  prefix: string,
  page: { limit?: number; cursor?: string } = {},
  now = Date.now(),
): Promise<Page> {
  const max = prefix ? `[${prefix}\xff` : '+';
  let min = page.cursor !== undefined ? `(${stageOfMember(page.cursor)}@\xff` : prefix ? `[${prefix}` : '-';
  const want = page.limit ?? Infinity;
  const budget = page.limit === undefined ? Infinity : Math.max(SCAN_FACTOR * page.limit, MIN_SCAN);
  const stages: DeferredStage[] = [];
  let scanned = 0;
  for (let floor = MIN_ROUND; ; floor *= 2) {
    // a round reads a little past the stages still wanted (more each round: a sparse index takes a
    // few rounds); the page ends on the licence of its last stage
    const n = Math.min(ROUND, Math.max(want - stages.length, floor), budget - scanned);
    const [members] = (await reader.run([['zrangebylex', keys.index, min, max, 'LIMIT', 0, n]])) as [string[]];
    let rows = await deferredOf(reader, keys, members);
    // the page is full at the want-th stage: the licences after it are left for the next page
    const full = rows.length >= want - stages.length;
    if (full) rows = rows.slice(0, want - stages.length);
    const read = full ? rows[rows.length - 1]!.at + 1 : members.length;
    scanned += read;
    const exhausted = !full && members.length < n;
    const last = members[read - 1];
    const end = full || (!exhausted && scanned >= budget);
    if (end && !full && last !== undefined) {
      // cut by the budget: the rest of the last stage's members (a failed-job record may sort before its licence)
      const sid = stageOfMember(last);
      const [rest] = (await reader.run([['zrangebylex', keys.index, `(${last}`, `[${sid}@\xff`]])) as [string[]];
      rows = [...rows, ...(await deferredOf(reader, keys, rest))];
    }
    const fields = await readFields(
      reader,
      rows.map((r) => keys.job(r.id)),
    );
    rows.forEach((r, j) => stages.push(deferredStage(r.id, r.pttl, fields[j] ?? {}, now)));
    if (exhausted) return { stages, nextCursor: null };
    if (end) return { stages, nextCursor: last! };
    min = `(${last!}`;
  }
}
