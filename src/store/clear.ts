import { randomUUID } from 'node:crypto';
import { ClearIncompleteError } from '../errors';
import { stageIdOfJobId } from '../stage-ref';
import { CMD } from './client';
import type { StoreParts } from './parts';
import { promoteAll } from './wake';

/** How many licences one clear script call handles. */
const CLEAR_BATCH = 500;

/** Licences of every stage whose id starts with `prefix` (an index range, not a scan). */
export async function licencesIn(s: StoreParts, prefix: string): Promise<string[]> {
  const c = await s.client();
  return (await c.zrangebylex!(s.keys.index, `[${prefix}`, `[${prefix}\xff`)) as string[];
}

/**
 * Ends every deferral in the scope prefix: each wake-up is promoted to run
 * now (BullMQ's own promote), then its marker deleted and its licence marked
 * `!` (a fresh chain). Promotion comes first, so a stage whose promotion
 * fails stays deferred and clearable again; a promotion that fails for
 * another reason than the window having just ended is retried once, then
 * reported (`ClearIncompleteError`, with what was cleared). Returns how many
 * deferrals it ended.
 */
export async function clearScope(s: StoreParts, prefix: string): Promise<number> {
  const licences = await s.licencesIn(prefix);
  let cleared = 0;
  const failed: unknown[] = [];
  const c = await s.client();
  for (let i = 0; i < licences.length; i += CLEAR_BATCH) {
    // deferrals only: a licence whose marker names it (not a wake-up in its backoff, cleared or failed)
    const batch = licences.slice(i, i + CLEAR_BATCH).filter((l) => !/[!?]$/.test(l));
    if (batch.length === 0) continue;
    // one read (the queue's keys share a slot); one that fails throws: no answer is no answer
    const markers = (await c.mget!(...batch.map((id) => s.keys.marker(stageIdOfJobId(id))))) as (string | null)[];
    const promoted = await promoteAll(
      s.queue,
      batch.filter((id, j) => markers[j] === id),
      failed,
    );
    if (promoted.length === 0) continue;
    // a batch sent again (its reply lost with the connection, ioredis resends it) answers the same
    const keys = [
      s.keys.index,
      s.keys.clearReply(randomUUID()),
      ...promoted.map((id) => s.keys.marker(stageIdOfJobId(id))),
    ];
    // the ids cleared, or (a batch sent again) the count its first run answered
    const r = (await s.tx.one('clear', (m) => m[CMD.sdClear]!(keys.length, ...keys, s.keys.base, ...promoted))) as
      string[] | number;
    cleared += typeof r === 'number' ? r : r.length;
  }
  if (failed.length > 0) throw new ClearIncompleteError(cleared, failed.length, failed[0]);
  return cleared;
}
