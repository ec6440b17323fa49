import { escapeControl } from './escape';

/**
 * A plain text table: a header row and left-aligned columns, two spaces apart.
 * Control characters in a cell are escaped (`escapeControl`): a newline or an
 * escape sequence in a scope never breaks the table or reaches the terminal.
 */
export function renderTable(header: readonly string[], cellRows: readonly (readonly string[])[]): string {
  const rows = cellRows.map((r) => r.map(escapeControl));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** `12.3s`, `4m05s`, `1h02m` for a duration in ms; `due` when it is not positive. */
export function formatRemaining(ms: number): string {
  if (ms <= 0) return 'due';
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
