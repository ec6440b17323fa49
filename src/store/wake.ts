import { promote } from '../bullmq/adapter';
import { ClearIncompleteError } from '../errors';
import { CMD } from './client';
import type { StoreParts } from './parts';

/** How many licences one clear script call handles. */
const CLEAR_BATCH = 500;

/**
 * Capacity has returned: ends the deferral of up to `limit` capacity-deferred
 * stages, longest-waiting first, in the scope prefix ('' for all) and of the
 * stage kind (encoded, '' for any), and promotes their wake-ups (see
 * `promoteWakeUps`). A resource's line (kind `@<resource>`) wakes round robin
 * across books with `roundRobin`. Returns the woken stage ids, in order.
 */
export async function wakeStages(
  s: StoreParts,
  limit: number,
  scopePrefix: string,
  kind: string,
  roundRobin = false,
): Promise<{ woken: { sid: string; wakeUpJobId: string }[]; opened: boolean }> {
  const k = s.keys;
  const r = (await s.tx.one('wake', (m) =>
    m[CMD.sdWake]!(
      k.index,
      `${k.base}sd:wqk`,
      kind ? `${k.base}sd:wq:${kind}` : `${k.base}sd:wqk`,
      k.base,
      roundRobin && kind.startsWith('@') ? `r${limit}` : limit,
      scopePrefix,
      kind,
    ),
  )) as (string | number)[];
  // a resource's line ends with whether its gate was deleted
  const opened = kind.startsWith('@') && Number(r.pop()) === 1;
  const woken = wokenPairs(r);
  await promoteWakeUps(
    s,
    woken.map((w) => w.wakeUpJobId),
  );
  return { woken, opened };
}

/** Licences of every stage whose id starts with `prefix` (an index range, not a scan). */
export async function licencesIn(s: StoreParts, prefix: string): Promise<string[]> {
  const c = await s.client();
  return (await c.zrangebylex!(s.keys.index, `[${prefix}`, `[${prefix}\xff`)) as string[];
}

/**
 * A wake by scope: ends every deferral in the scope prefix, any class, with a
 * fresh chain (`CLEAR`, 500 licences a call), and promotes the ended stages'
 * wake-ups as `wakeStages` does. Returns how many deferrals it ended: exact
 * when nothing races; a call whose reply is lost counts nothing for its batch
 * (its stages are no longer deferred, their wake-ups run at their time).
 * A batch that fails after an earlier one answered rejects with
 * `ClearIncompleteError` (the count so far); a first batch that fails rejects
 * with its own error.
 */
export async function clearScope(s: StoreParts, prefix: string): Promise<number> {
  // deferrals only: not a licence marked '!' (a fresh chain: no marker) or '?' (a failed job's record)
  const licences = (await s.licencesIn(prefix)).filter((l) => !/[!?]$/.test(l));
  let cleared = 0;
  for (let i = 0; i < licences.length; i += CLEAR_BATCH) {
    const batch = licences.slice(i, i + CLEAR_BATCH);
    const ended = (await s.tx
      .one('clear', (m) => m[CMD.sdClear]!(s.keys.index, s.keys.base, ...batch))
      .catch((error: unknown) => {
        throw i === 0 ? error : new ClearIncompleteError(cleared, error);
      })) as string[];
    cleared += ended.length;
    await promoteWakeUps(s, ended);
  }
  return cleared;
}

/**
 * Promotes the wake-ups of deferrals just ended, together, to run now. One
 * that cannot be promoted (gone, no longer delayed, a slot migrating) still
 * runs at its time: its stage is no longer deferred, and nothing is lost.
 */
export async function promoteWakeUps(s: StoreParts, ids: readonly string[]): Promise<void> {
  await Promise.all(ids.map((id) => promote(s.queue, id).catch(() => undefined)));
}

/**
 * An early wake-up (promoted by a clock ahead of Redis') was just re-delayed for the rest of its
 * window. A wake or a clear that ended its deferral meanwhile found it active, so its promote
 * failed: when its marker no longer names it, it is promoted now (best effort: one that is gone
 * or no longer delayed is left alone).
 */
export async function promoteUnlessDeferred(s: StoreParts, sid: string, jobId: string): Promise<void> {
  const c = await s.client();
  if ((await c.get!(s.keys.marker(sid))) !== jobId) await promote(s.queue, jobId).catch(() => undefined);
}

/** A script's `stage id, wake-up id` pairs (WAKE's reply, a release's woken line: an even number of items), in order. */
export function wokenPairs(r: readonly unknown[]): { sid: string; wakeUpJobId: string }[] {
  const woken: { sid: string; wakeUpJobId: string }[] = [];
  for (let i = 0; i < r.length; i += 2) woken.push({ sid: String(r[i]), wakeUpJobId: String(r[i + 1]) });
  return woken;
}
