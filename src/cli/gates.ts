import { checkResource, encodeResource } from '../resource';
import type { QueueKeys, Reader } from '../store/reader';
import { formatRemaining, renderTable } from './table';

/**
 * `gates`: each resource's gate and line (see docs/design.md, "Resource gates"). A named
 * resource reads its two keys; with none named, the queue's gate and line keys are found with
 * SCAN (on a Cluster, on each master: the queue's keys share one slot).
 */

/** One resource as `gates` prints it. */
export interface GateRow {
  resource: string;
  /** `open` (no gate key), `closed` (until the window ends), `probing` (one probe in flight until its lease ends). */
  gate: 'open' | 'closed' | 'probing';
  /** Redis' time the window or the probe's lease ends, ms; null when open. */
  until: number | null;
  /** Stages in its line: waiting, or woken and not yet done (as the `resource.waiting` gauge counts them). */
  waiting: number;
}

/** What SCAN needs of a client: ioredis, or each master of a Cluster. */
export interface Scannable {
  scan(cursor: string, match: 'MATCH', pattern: string, count: 'COUNT', n: number): Promise<[string, string[]]>;
  nodes?: (role: 'master') => Scannable[];
}

/** `text` with Redis' glob characters escaped, for a MATCH pattern. */
const globEscape = (text: string) => text.replace(/[\\*?[\]]/g, '\\$&');

/** The encoded names of every resource with a gate or a line. */
async function scanResources(redis: Scannable, keys: QueueKeys): Promise<string[]> {
  const found = new Set<string>();
  const nodes = redis.nodes ? redis.nodes('master') : [redis];
  for (const [head, pattern] of [
    [`${keys.base}sd:gate:`, `${globEscape(keys.base)}sd:gate:*`],
    [`${keys.base}sd:wq:@`, `${globEscape(keys.base)}sd:wq:@*`],
  ] as const) {
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        for (const key of batch) found.add(key.slice(head.length));
        cursor = next;
      } while (cursor !== '0');
    }
  }
  return [...found].sort();
}

/**
 * The gates of the named resources (checked, before any read), else of every resource found.
 * A named resource with neither a gate nor a line is left out (the caller says it matched nothing).
 */
export async function readGates(
  redis: Scannable,
  reader: Reader,
  keys: QueueKeys,
  names: readonly string[],
): Promise<GateRow[]> {
  const encoded =
    names.length > 0 ? names.map((n) => encodeResource(checkResource(n, 'gates'))) : await scanResources(redis, keys);
  const replies = await reader.run(
    encoded.flatMap((r) => [
      ['get', `${keys.base}sd:gate:${r}`],
      ['zcard', `${keys.base}sd:wq:@${r}`],
    ]),
  );
  const rows: GateRow[] = [];
  encoded.forEach((r, i) => {
    const g = replies[2 * i] as string | null;
    const waiting = replies[2 * i + 1] as number;
    if (g === null && waiting === 0) return;
    const resource = decodeURIComponent(r);
    if (g === null) rows.push({ resource, gate: 'open', until: null, waiting });
    else if (g.startsWith('p')) rows.push({ resource, gate: 'probing', until: Number(g.slice(1)), waiting });
    else rows.push({ resource, gate: 'closed', until: Number(g), waiting });
  });
  return rows;
}

/** The `--json` form of a row: `until` as ISO text, and the time left on Redis' clock. */
export function gateJson(row: GateRow, now: number) {
  return {
    ...row,
    until: row.until === null ? null : new Date(row.until).toISOString(),
    remainingMs: row.until === null ? null : Math.max(0, row.until - now),
  };
}

/** The table `gates` prints. A closed gate whose window ended shows `due`: the next dispatch probes. */
export function gatesTable(rows: readonly GateRow[], now: number): string {
  return renderTable(
    ['RESOURCE', 'GATE', 'UNTIL', 'IN', 'WAITING'],
    rows.map((r) => [
      r.resource,
      r.gate,
      r.until === null ? '-' : new Date(r.until).toISOString(),
      r.until === null ? '-' : formatRemaining(r.until - now),
      String(r.waiting),
    ]),
  );
}
