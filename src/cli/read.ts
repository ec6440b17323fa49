import { jobIdOfLicence, parseLicence } from '../job-data';
import { parseStageId, stageIdOfJobId } from '../stage-ref';
import type { DeferredStage, OutcomeClass } from '../types';
import { readFields, type Cmd, type QueueKeys, type Reader } from './reader';

/**
 * The CLI's reads. Each touches only what it prints: `show` one stage's keys,
 * `list` the licence index (one page of it with `limit`) and, per deferred
 * stage, its marker and a few fields of its wake-up's data, never the payload.
 */

/** What `show` prints (`--json`: this object, plus the ref's text form). */
export interface StageState {
  state: 'deferred' | 'in_flight' | 'pending' | 'failed' | 'idle';
  deferred?: DeferredStage;
  log?: string[];
  jobId?: string;
  jobState?: string;
  failedReason?: string;
}

/** BullMQ's `getState`, for several jobs in one pipeline: the sets checked in its order. */
const STATES: [cmd: 'zscore' | 'lpos', set: string, state: string][] = [
  ['zscore', 'completed', 'completed'],
  ['zscore', 'failed', 'failed'],
  ['zscore', 'delayed', 'delayed'],
  ['zscore', 'prioritized', 'prioritized'],
  ['lpos', 'active', 'active'],
  ['lpos', 'wait', 'waiting'],
  ['lpos', 'paused', 'waiting'],
  ['zscore', 'waiting-children', 'waiting-children'],
];

async function jobStates(reader: Reader, keys: QueueKeys, ids: readonly string[]): Promise<string[]> {
  const commands: Cmd[] = ids.flatMap((id) => STATES.map(([cmd, set]) => [cmd, keys.set(set), id] as Cmd));
  const replies = await reader.run(commands);
  return ids.map((_, i) => {
    const hit = STATES.findIndex((_s, j) => replies[i * STATES.length + j] !== null);
    return hit < 0 ? 'unknown' : STATES[hit]![2];
  });
}

function deferredStage(
  id: string,
  pttl: number,
  fields: { reason?: string; class?: string; deferrals?: number },
  now: number,
) {
  const lic = parseLicence(id);
  const cls = (fields.class ?? lic?.cls ?? 'capacity') as OutcomeClass;
  const stage: DeferredStage = {
    ref: parseStageId(stageIdOfJobId(id)),
    reason: fields.reason ?? 'unknown',
    class: cls,
    until: now + Math.max(0, pttl),
    deferrals: fields.deferrals ?? (lic ? lic.chain[cls] : 0),
    wakeUpJobId: id,
  };
  return stage;
}

/**
 * One stage's state, from its own keys only: the marker, the lock, its
 * licences (a ZRANGEBYLEX on `[<sid>@`), its deduplication key and the jobs
 * they name. A failed job is found through its `?` licence.
 */
export async function readStage(reader: Reader, keys: QueueKeys, sid: string, now = Date.now()): Promise<StageState> {
  const [marker, pttl, lock, licences, dedup] = (await reader.run([
    ['get', keys.marker(sid)],
    ['pttl', keys.marker(sid)],
    ['exists', keys.lock(sid)],
    ['zrangebylex', keys.licences, `[${sid}@`, `[${sid}@\xff`],
    ['get', keys.dedup(sid)],
  ])) as [string | null, number, number, string[], string | null];
  if (marker !== null) {
    const [[fields], log] = await Promise.all([
      readFields(reader, [keys.job(marker)]),
      reader.run([['lrange', `${keys.job(marker)}:logs`, 0, -1]]).then((r) => r[0] as string[]),
    ]);
    return {
      state: 'deferred',
      deferred: deferredStage(marker, pttl, fields ?? { exists: false, dispatch: false }, now),
      log,
    };
  }
  if (lock === 1) return { state: 'in_flight' };
  // the jobs that may speak for the stage, newest kind first: its live wake-up, the job
  // `enqueue` added, a job that failed for good
  const live = licences.find((l) => !l.endsWith('?'));
  const failedLicence = licences.find((l) => l.endsWith('?'));
  const ids = [
    ...new Set([live && jobIdOfLicence(live), dedup, failedLicence && jobIdOfLicence(failedLicence)]),
  ].filter((id): id is string => typeof id === 'string' && id !== '');
  const states = await jobStates(reader, keys, ids);
  const pending = states.findIndex((s) => s !== 'completed' && s !== 'failed' && s !== 'unknown');
  if (pending >= 0) return { state: 'pending', jobId: ids[pending], jobState: states[pending] };
  // the engine marks every job that fails for good with a `?` licence (until a later success or cancel)
  const failed = ids[states.indexOf('failed')];
  if (!failed) return { state: 'idle' };
  const [reason] = (await reader.run([['hget', keys.job(failed), 'failedReason']])) as [string | null];
  return { state: 'failed', jobId: failed, jobState: 'failed', ...(reason ? { failedReason: reason } : {}) };
}

export interface Page {
  stages: DeferredStage[];
  /** The last licence read, to pass back as `cursor`, when the page was full; else null. */
  nextCursor: string | null;
}

/** How many licences one round of `listStages` inspects. */
const ROUND = 500;

/**
 * The deferred stages under a stage-id prefix, from the licence index: all of
 * them, or `limit` licences after `cursor` (a licence, exclusive). A licence
 * whose stage is not deferred (pending, cleared, failed) is skipped, so a
 * page may print fewer rows than `limit`.
 */
export async function listStages(
  reader: Reader,
  keys: QueueKeys,
  prefix: string,
  page: { limit?: number; cursor?: string } = {},
  now = Date.now(),
): Promise<Page> {
  const min = page.cursor !== undefined ? `(${page.cursor}` : prefix ? `[${prefix}` : '-';
  const max = prefix ? `[${prefix}\xff` : '+';
  const limit = page.limit === undefined ? [] : ['LIMIT', 0, page.limit];
  const [members] = (await reader.run([['zrangebylex', keys.licences, min, max, ...limit]])) as [string[]];
  const stages: DeferredStage[] = [];
  for (let i = 0; i < members.length; i += ROUND) {
    const ids = members.slice(i, i + ROUND).map(jobIdOfLicence);
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
  }
  const full = page.limit !== undefined && members.length === page.limit && members.length > 0;
  return { stages, nextCursor: full ? (members[members.length - 1] as string) : null };
}
