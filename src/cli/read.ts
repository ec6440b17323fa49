import { jobIdOfLicence } from '../job-data';
import { deferredStage } from '../store/listing';
import { readFields, type Cmd, type QueueKeys, type Reader } from '../store/reader';
import type { DeferredStage } from '../types';

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

/**
 * One stage's state, from its own keys only: the marker, the lock, its
 * licences (a range of the index on `[<sid>@`), its deduplication key and the jobs they name. A failed job is found through its `?` licence.
 */
export async function readStage(reader: Reader, keys: QueueKeys, sid: string, now = Date.now()): Promise<StageState> {
  const [marker, pttl, lock, licences, dedup] = (await reader.run([
    ['get', keys.marker(sid)],
    ['pttl', keys.marker(sid)],
    ['get', keys.lock(sid)],
    // the members of the stage: '<sid>@…' (no stage id holds an '@', which sorts just before 'A')
    ['zrangebylex', keys.index, `[${sid}@`, `(${sid}A`],
    ['get', keys.dedup(sid)],
  ])) as [string | null, number, string | null, string[], string | null];
  if (marker !== null) {
    const [[fields], log] = await Promise.all([
      readFields(reader, [keys.job(marker)]),
      reader.run([['lrange', `${keys.job(marker)}:logs`, 0, -1]]).then((r) => r[0] as string[]),
    ]);
    return {
      state: 'deferred',
      deferred: deferredStage(marker, pttl, fields ?? {}, now),
      log,
    };
  }
  // the lock lives while its key exists
  if (lock !== null) return { state: 'in_flight' };
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
