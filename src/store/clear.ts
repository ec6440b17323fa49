import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import { promote } from '../bullmq/adapter';
import { ClearIncompleteError, ReplicationUnconfirmedError } from '../errors';
import { stageIdOfJobId } from '../stage-ref';
import { CMD } from './client';
import type { StoreParts } from './parts';

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
    const nonce = randomUUID();
    const pending = s.keys.clearPending(nonce);
    // one read (the queue's keys share a slot), which marks each wake-up its marker names with the
    // batch's nonce before it is promoted (a run of it that begins before this batch's CLEAR ends
    // its deferral itself and counts it in `pending`); one that fails throws: no answer is no answer
    const markerKeys = batch.map((id) => s.keys.marker(stageIdOfJobId(id)));
    const markerOf = new Map(batch.map((id, j) => [id, markerKeys[j]!]));
    const [open, ...markers] = (await c[CMD.sdClearMark]!(
      batch.length,
      ...markerKeys,
      s.keys.base,
      nonce,
      ...batch,
    )) as [number, ...(string | null)[]];
    const { promoted, refused } = await promoteAll(
      s.queue,
      batch.filter((id, j) => markers[j] === id),
    );
    if (promoted.length === 0 && (refused.length === 0 || !open)) {
      // nothing to record, and no mark to take back (none was made, or no promotion was even
      // tried): the refused stay deferred; the count, if one was opened, goes (a delete refused,
      // a slot migrating, leaves it its day)
      for (const [, error] of refused) failed.push(error);
      if (open) await c.del!(pending).catch(() => undefined);
      continue;
    }
    // the promoted are recorded; the refused stay deferred, their marks taken back, but one whose
    // run used its mark ran anyway and ended its deferral: cleared, not refused. A
    // batch sent again (its reply lost with the connection, ioredis resends it) answers the same
    const keys = [s.keys.index, s.keys.clearReply(nonce), pending, ...promoted.map((id) => markerOf.get(id)!)];
    const refusedIds = refused.map(([id]) => id);
    const record = s.tx.one('clear', (m) =>
      m[CMD.sdClear]!(keys.length, ...keys, s.keys.base, nonce, promoted.length, ...promoted, ...refusedIds),
    );
    // a record that failed is read back from its kept answer, in case it ran (its reply lost: a
    // timeout, a connection given up). One that did not run (a slot migrating
    // refuses it): with some promoted, its error is the clear's, and the batches after it stay
    // deferred; with nothing promoted, the batch's stages are reported not cleared,
    // their marks left until the count's day is out (a run of one meanwhile starts a fresh chain:
    // docs/design.md). A read-back that keeps failing leaves the outcome unknown: the record's
    // error is the clear's. So is a replica wait unconfirmed: the record ran, but the replicas
    // may not hold it (clear again)
    const answer = await record.catch(async (error: unknown) => {
      if (error instanceof ReplicationUnconfirmedError) throw error;
      const kept = await keptAnswer(c, s.keys.clearReply(nonce));
      if (kept === undefined || (kept === null && promoted.length > 0)) throw error;
      return kept ?? [0];
    });
    const [count, ...ranAnyway] = answer as [number, ...string[]];
    cleared += Number(count);
    for (const [id, error] of refused) if (!ranAnyway.includes(id)) failed.push(error);
  }
  if (failed.length > 0) throw new ClearIncompleteError(cleared, failed.length, failed[0]);
  return cleared;
}

/** How long `keptAnswer` tries again, ms: no read starts after this since the first. */
const KEPT_READ_MS = 3000;

/**
 * A clear batch's answer as its CLEAR kept it (`<count>,<id>,...`), `null` when it kept none (it
 * did not run: the read queues behind it on the same connection), `undefined` when no read got an
 * answer. A read that fails (it timed out behind the same stall as the record's reply, say) is
 * tried again, as the record's reply may just be late, for `KEPT_READ_MS`.
 */
async function keptAnswer(
  c: Awaited<ReturnType<StoreParts['client']>>,
  key: string,
): Promise<[number, ...string[]] | null | undefined> {
  const until = Date.now() + KEPT_READ_MS;
  for (let wait = 100; Date.now() < until; wait *= 2) {
    const kept = (await c.get!(key).then(
      (v) => v as string | null,
      () => undefined,
    )) as string | null | undefined;
    if (kept === undefined) {
      await sleep(Math.min(wait, Math.max(0, until - Date.now())));
      continue;
    }
    if (kept === null) return null;
    const [count, ...ids] = kept.split(',');
    return [Number(count), ...ids];
  }
  return undefined;
}

/**
 * Promotes wake-ups; `promoted`: those on their way now (promoted, or no longer delayed: its
 * window just ended, or an operator promoted it: it is waiting or running already). Other
 * errors are retried once, then answered in `refused`, with their errors.
 */
async function promoteAll(queue: Queue, ids: string[]): Promise<{ promoted: string[]; refused: [string, unknown][] }> {
  const once = async (todo: string[]) => {
    const settled = await Promise.allSettled(todo.map((id) => promote(queue, id)));
    const errors: [string, unknown][] = [];
    const ok: string[] = [];
    settled.forEach((r, j) => {
      if (r.status === 'fulfilled' || /not in the delayed state/.test(String((r.reason as Error)?.message)))
        ok.push(todo[j]!);
      else errors.push([todo[j]!, r.reason]);
    });
    return { ok, errors };
  };
  const first = await once(ids);
  if (first.errors.length === 0) return { promoted: first.ok, refused: [] };
  await sleep(100);
  const second = await once(first.errors.map(([id]) => id));
  return { promoted: [...first.ok, ...second.ok], refused: second.errors };
}
