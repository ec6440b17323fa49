import type { GateState } from '../types';
import { formatRemaining, renderTable } from './table';

/** The `--json` form of a row: `until` as ISO text, and the time left on Redis' clock. */
export function gateJson(row: GateState, now: number) {
  return {
    ...row,
    until: row.until === null ? null : new Date(row.until).toISOString(),
    remainingMs: row.until === null ? null : Math.max(0, row.until - now),
  };
}

/** The table `gates` prints. A closed gate whose window ended shows `due`: the next dispatch probes. */
export function gatesTable(rows: readonly GateState[], now: number): string {
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
