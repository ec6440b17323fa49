import type { GateState } from '../types';
import type { StoreKeys } from './keys';
import type { Reader } from './reader';

/**
 * Each resource's gate and line (see docs/design.md, "Resource gates"): `listGates` and the CLI's
 * `gates`. A named resource reads its two keys; with none named, the queue's gate and line keys
 * are found with SCAN (on a Cluster, on each master: the queue's keys share one slot).
 */

/** What SCAN needs of a client: ioredis, or each master of a Cluster. */
export interface Scannable {
  scan(cursor: string, match: 'MATCH', pattern: string, count: 'COUNT', n: number): Promise<[string, string[]]>;
  nodes?: (role: 'master') => Scannable[];
}

/** `text` with Redis' glob characters escaped, for a MATCH pattern. */
const globEscape = (text: string) => text.replace(/[\\*?[\]]/g, '\\$&');

/** The encoded names of every resource with a gate or a line. */
async function scanResources(redis: Scannable, keys: Pick<StoreKeys, 'base'>): Promise<string[]> {
  const found = new Set<string>();
  const nodes = redis.nodes ? redis.nodes('master') : [redis];
  for (const [head, pattern] of [
    [`${keys.base}sd:gate:`, `${globEscape(keys.base)}sd:gate:*`],
    [`${keys.base}sd:wq:@`, `${globEscape(keys.base)}sd:wq:@*`],
  ] as const) {
    for (const node of nodes) {
      // Stryker disable next-line StringLiteral: equivalent: Redis reads an empty cursor as 0
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

/** A gate's time as the begin reads it (`tonumber(…) or 0`): a value set by hand that is no number has ended. */
const timeOf = (text: string) => Number(text) || 0;

/** A resource's name from its key; a key made by hand that is no percent-encoding shows as it is. */
function nameOf(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}

/**
 * The gates of the named resources (encoded: the caller checked them before connecting; each
 * once), else of every resource found. A named resource with neither a gate nor a line is left
 * out (its gate is open and nothing waits).
 */
export async function readGates(
  redis: Scannable,
  reader: Reader,
  keys: Pick<StoreKeys, 'base'>,
  named: readonly string[],
): Promise<GateState[]> {
  const encoded = named.length > 0 ? [...new Set(named)] : await scanResources(redis, keys);
  const replies = await reader.run(
    encoded.flatMap((r) => [
      ['get', `${keys.base}sd:gate:${r}`],
      ['zcard', `${keys.base}sd:wq:@${r}`],
    ]),
  );
  const rows: GateState[] = [];
  encoded.forEach((r, i) => {
    const g = replies[2 * i] as string | null;
    const waiting = replies[2 * i + 1] as number;
    if (g === null && waiting === 0) return;
    const resource = nameOf(r);
    if (g === null) rows.push({ resource, gate: 'open', until: null, waiting });
    else if (g.startsWith('p')) rows.push({ resource, gate: 'probing', until: timeOf(g.slice(1)), waiting });
    else rows.push({ resource, gate: 'closed', until: timeOf(g), waiting });
  });
  return rows;
}
