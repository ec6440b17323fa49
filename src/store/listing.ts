import { jobIdOfLicence, parseLicence } from '../job-data';
import { parseStageId, stageIdOfJobId } from '../stage-ref';
import type { DeferredStage, OutcomeClass } from '../types';
import type { StoreKeys } from './keys';
import { readFields, type Cmd, type Reader } from './reader';

/** One deferred stage as the views show it, from its wake-up's id, its marker's TTL and a few data fields. */
export function deferredStage(
  id: string,
  pttl: number,
  fields: { reason?: string; class?: string; deferrals?: number },
  now: number,
): DeferredStage {
  const lic = parseLicence(id);
  const cls = (fields.class ?? lic?.cls ?? 'capacity') as OutcomeClass;
  return {
    ref: parseStageId(stageIdOfJobId(id)),
    reason: fields.reason ?? 'unknown',
    class: cls,
    until: now + Math.max(0, pttl),
    deferrals: fields.deferrals ?? (lic ? lic.chain[cls] : 0),
    wakeUpJobId: id,
  };
}

export interface Page {
  stages: DeferredStage[];
  /** Where the next page starts (pass it back as `cursor`); null when the listing is complete. */
  nextCursor: string | null;
}

/** Licences one round reads at most (one `ZRANGEBYLEX … LIMIT`, then one pipeline per round). */
const ROUND = 500;
/** A page reads at most this many licences per stage asked for (and at least `MIN_SCAN`), as `SCAN` bounds its work. */
const SCAN_FACTOR = 10;
const MIN_SCAN = 1000;

/**
 * The deferred stages under a stage-id prefix, read from the licence index in
 * rounds (an index range, never a scan of the keyspace): all of them, or one
 * page of at most `limit` after `cursor`. A licence whose stage is not
 * deferred (its wake-up pending, cleared, failed) is skipped. A page's work is
 * bounded like `SCAN`'s: it reads at most `max(10 × limit, 1000)` licences,
 * so it can hold fewer than `limit` stages (even none) with a cursor to go on
 * from; the listing is complete when `nextCursor` is null. Memory and time
 * per page do not grow with the number of stages outside it.
 */
export async function listStages(
  reader: Reader,
  keys: Pick<StoreKeys, 'index' | 'marker' | 'job'>,
  prefix: string,
  page: { limit?: number; cursor?: string } = {},
  now = Date.now(),
): Promise<Page> {
  const max = prefix ? `[${prefix}\xff` : '+';
  let min = page.cursor !== undefined ? `(${page.cursor}` : prefix ? `[${prefix}` : '-';
  const want = page.limit ?? Infinity;
  const budget = page.limit === undefined ? Infinity : Math.max(SCAN_FACTOR * page.limit, MIN_SCAN);
  const stages: DeferredStage[] = [];
  let scanned = 0;
  for (;;) {
    // never more licences than stages still wanted: a page ends exactly on its last licence
    const n = Math.min(ROUND, want - stages.length, budget - scanned);
    const [members] = (await reader.run([['zrangebylex', keys.index, min, max, 'LIMIT', 0, n]])) as [string[]];
    scanned += members.length;
    const ids = members.map(jobIdOfLicence);
    const markers = await reader.run(
      ids.flatMap((id): Cmd[] => [
        ['get', keys.marker(stageIdOfJobId(id))],
        ['pttl', keys.marker(stageIdOfJobId(id))],
      ]),
    );
    const deferred = ids
      .map((id, j) => ({ id, marker: markers[2 * j] as string | null, pttl: Number(markers[2 * j + 1]) }))
      .filter((r) => r.marker === r.id && r.pttl >= 0);
    const fields = await readFields(
      reader,
      deferred.map((r) => keys.job(r.id)),
    );
    deferred.forEach((r, j) =>
      stages.push(deferredStage(r.id, r.pttl, fields[j] ?? { exists: false, dispatch: false }, now)),
    );
    if (members.length < n) return { stages, nextCursor: null };
    const last = members[members.length - 1]!;
    if (stages.length >= want || scanned >= budget) return { stages, nextCursor: last };
    min = `(${last}`;
  }
}
