import { promote } from '../bullmq/adapter';
import { CMD } from './client';
import type { StoreParts } from './parts';

/**
 * Capacity has returned: ends the deferral of up to `limit` capacity-deferred
 * stages, longest-waiting first, in the scope prefix ('' for all) and of the
 * stage kind (encoded, '' for any), and promotes their wake-ups (one script,
 * then the promotions sent together). Returns the woken stage ids, in order.
 * A wake-up that cannot be promoted still runs at its time: its stage is no
 * longer deferred, and nothing is lost.
 */
export async function wakeStages(
  s: StoreParts,
  limit: number,
  scopePrefix: string,
  kind: string,
): Promise<{ sid: string; wakeUpJobId: string }[]> {
  const k = s.keys;
  const r = (await s.tx.one('wake', (m) =>
    m[CMD.sdWake]!(
      k.index,
      `${k.base}sd:wqk`,
      kind ? `${k.base}sd:wq:${kind}` : `${k.base}sd:wqk`,
      k.base,
      limit,
      scopePrefix,
      kind,
    ),
  )) as string[];
  const woken: { sid: string; wakeUpJobId: string }[] = [];
  for (let i = 0; i < r.length; i += 2) woken.push({ sid: r[i]!, wakeUpJobId: r[i + 1]! });
  await Promise.all(woken.map((w) => promote(s.queue, w.wakeUpJobId).catch(() => undefined)));
  return woken;
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
