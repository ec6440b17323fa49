import type { Queue } from 'bullmq';
import { jobIdOfLicence } from '../job-data';
import { CMD } from './client';
import type { StoreParts } from './parts';

/**
 * Cancels a stage (the CANCEL script: its deferral ended, its licence revoked, its jobs marked
 * cancelled), then removes the jobs that would otherwise still run.
 */
export async function cancelStage(
  s: StoreParts,
  sid: string,
): Promise<{ hadDeferral: boolean; inFlight: boolean; removedJobs: number }> {
  const k = s.keys;
  const r = (await s.tx.one('cancel', (m) =>
    m[CMD.sdCancel]!(k.marker(sid), k.lock(sid), k.index, k.dedup(sid), sid, k.base),
  )) as [number, number, string, ...string[]];
  // a failed job (`?`) stays as the record of its failure (marked cancelled: a retry by hand stops);
  // one already retried by hand and waiting is removed like any pending job
  const members = r.slice(3) as string[];
  const retried = await Promise.all(
    members
      // Stryker disable next-line StringLiteral: equivalent: with '' every member is asked its state, but a pending member is also taken below (`!l.endsWith('?')`) and the Set keeps it once: the same ids, in the same order
      .filter((l) => l.endsWith('?'))
      .map(async (l) => {
        const state = await s.queue.getJobState(jobIdOfLicence(l)).catch(() => 'unknown');
        return state === 'failed' || state === 'completed' || state === 'unknown' ? [] : [jobIdOfLicence(l)];
      }),
  );
  const ids = [...members.filter((l) => !l.endsWith('?')).map(jobIdOfLicence), ...retried.flat()];
  if (r[2]) ids.push(r[2]);
  // a job may be both the licence holder and the pending enqueued job: removed once
  const removedJobs = await s.removeJobs([...new Set(ids)]);
  return { hadDeferral: r[0] === 1, inFlight: r[1] === 1, removedJobs };
}

/** Removes jobs by id, best effort: a job that is active (locked) stays, and does nothing without its licence. */
export async function removeJobs(queue: Queue, ids: readonly string[]): Promise<number> {
  // Stryker disable next-line ArrowFunction: equivalent: a removal that throws counts as not removed, whether it reads 0 or undefined (only 1 counts)
  const codes = await Promise.all(ids.map((id) => queue.remove(id).catch(() => 0)));
  return codes.filter((code) => code === 1).length;
}
