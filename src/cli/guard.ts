import type { StageRef } from '../types';
import { UsageError } from './errors';
import { readFields, type QueueKeys, type Reader } from '../store/reader';

/**
 * Checks made before the CLI writes anything, so that pointed at the wrong
 * queue it refuses instead of deleting someone else's job.
 */

/** An engine job id: `<stage id>@r.…` (enqueued) or `<stage id>@cap.…` / `@idem.…` (a wake-up). */
const SEGMENT = "[A-Za-z0-9\\-_.!~*'()%]+";
const ENGINE_JOB_ID = new RegExp(`^${SEGMENT}(?:/${SEGMENT})+@(?:r|cap|idem)\\.`);

export function isEngineJobId(id: string): boolean {
  return ENGINE_JOB_ID.test(id);
}

const SAMPLE = 10;
const SAMPLED: [cmd: 'lrange' | 'zrange', set: string][] = [
  ['lrange', 'wait'],
  ['lrange', 'active'],
  ['lrange', 'paused'],
  ['zrange', 'delayed'],
  ['zrange', 'prioritized'],
  ['zrange', 'waiting-children'],
  ['zrange', 'failed'],
  ['zrange', 'completed'],
];

/**
 * Refuses (UsageError) a queue that holds jobs but none of the engine's: no
 * licence index, and of up to 10 jobs from each BullMQ list and set, none with
 * an engine job id or dispatch job data (`v: 1`, `scope`, `stage`). An empty
 * queue passes: there is nothing in it to harm.
 */
export async function checkDispatchQueue(reader: Reader, keys: QueueKeys, where: string): Promise<void> {
  const replies = await reader.run([
    ['exists', keys.index],
    ...SAMPLED.map(([cmd, set]) => [cmd, keys.set(set), 0, SAMPLE - 1] as const),
  ]);
  if (replies[0] === 1) return;
  const ids = [...new Set((replies.slice(1) as string[][]).flat())];
  if (ids.length === 0 || ids.some(isEngineJobId)) return;
  const fields = await readFields(
    reader,
    ids.map((id) => keys.job(id)),
  );
  if (fields.some((f) => f.dispatch)) return;
  throw new UsageError(
    `Not a dispatch queue (${where}): it has jobs (e.g. ${JSON.stringify(ids[0])}) but no licence index and ` +
      `no dispatch job (ids \`<stage id>@…\`, data \`{ v: 1, scope, stage }\`); check --queue and --prefix. Nothing was changed.`,
  );
}

/**
 * Refuses to cancel a stage whose deduplication key names a job that is not a
 * dispatch job of that very stage (e.g. an ordinary job deduplicated as
 * `order/123` on the queue `orders`, for the ref `order:123`): the engine's
 * cancel would remove it.
 */
export async function checkCancel(reader: Reader, keys: QueueKeys, ref: StageRef, sid: string, text: string) {
  const [jobId] = (await reader.run([['get', keys.dedup(sid)]])) as [string | null];
  if (jobId === null || jobId.startsWith(`${sid}@`)) return;
  const [fields] = await readFields(reader, [keys.job(jobId)]);
  const own = fields?.ref && JSON.stringify(fields.ref) === JSON.stringify([ref.scope, ref.stage]);
  if (fields?.dispatch && own) return;
  throw new UsageError(
    `Refusing to cancel ${text}: its deduplication key ${keys.dedup(sid)} names the job ${JSON.stringify(jobId)}, ` +
      `which is not a dispatch job of this stage (is --queue a dispatch queue?). Nothing was changed.`,
  );
}
