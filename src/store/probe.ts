import { CMD } from './client';
import type { StoreParts } from './parts';
import { withRedirects } from './redirects';
import { connectionOf, type ReplicaWait } from './replica-wait';

export type ProbeOutcome =
  | { kind: 'deferred'; remainingMs: number }
  | { kind: 'in_flight' }
  /** A job that carries the stage is waiting, delayed or active (or failed for good and retried by hand). */
  | { kind: 'pending'; jobId: string }
  | { kind: 'none' };

/**
 * What an enqueue would find, in one script (src/lua/enqueue-probe.lua): the
 * state of the job holding the stage's licence included. A licence whose job
 * was removed by hand is dropped. With `waitForReplicas`, the same pipeline reads
 * `CLIENT INFO` (`connection`): the connection BullMQ's add will then be made
 * on, to check the add's `WAIT` against.
 */
export async function probeStage(
  s: StoreParts,
  replicas: ReplicaWait | undefined,
  sid: string,
): Promise<ProbeOutcome & { connection?: string }> {
  const c = await s.client();
  const keys = [s.keys.marker(sid), s.keys.lock(sid), s.keys.index, sid];
  let r: [number, ...unknown[]];
  let connection: string | undefined;
  if (replicas?.active) {
    const replies = await withRedirects(c, async () => {
      const out = (await c.pipeline()[CMD.sdProbe]!(...keys).client!('INFO').exec()) ?? [];
      for (const [err] of out) if (err) throw err;
      return out;
    });
    r = replies[0]![1] as [number, ...unknown[]];
    connection = connectionOf(replies[1]![1]);
  } else {
    r = (await c[CMD.sdProbe]!(...keys)) as [number, ...unknown[]];
  }
  const outcome: ProbeOutcome =
    r[0] === 1
      ? { kind: 'deferred', remainingMs: Math.max(0, Number(r[1])) }
      : r[0] === 2
        ? { kind: 'in_flight' }
        : r[0] === 3
          ? { kind: 'pending', jobId: String(r[1]) }
          : { kind: 'none' };
  return { ...outcome, connection };
}
