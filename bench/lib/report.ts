import { fmt } from './stats';

/** One line of the summary table. */
export interface Row {
  scenario: string;
  measure: string;
  /** The plugin's figure (median where repeated). */
  plugin: number | string;
  /** The compared figure (raw BullMQ, naive scheduler, ...), if any. */
  baseline?: number | string;
  /** The ratio the target is about, as the target states it. */
  ratio?: number;
  target: string;
  /** null: informational, no target. */
  met: boolean | null;
}

export interface ScenarioResult {
  name: string;
  rows: Row[];
  /** Everything measured, for latest.json. */
  details: Record<string, unknown>;
}

export interface BenchContext {
  quick: boolean;
  /** Scale a full-run count down for --quick. */
  n(full: number, quick: number): number;
}

function cell(v: number | string | undefined, digits: number): string {
  if (v === undefined) return '';
  return typeof v === 'number' ? fmt(v, Number.isInteger(v) ? 0 : digits) : v;
}

export function table(rows: readonly Row[]): string {
  const head = ['scenario', 'measure', 'plugin', 'baseline', 'ratio', 'target', 'met'];
  const body = rows.map((r) => [
    r.scenario,
    r.measure,
    cell(r.plugin, 1),
    cell(r.baseline, 1),
    r.ratio === undefined ? '' : fmt(r.ratio, 2),
    r.target,
    r.met === null ? '' : r.met ? 'yes' : 'NO',
  ]);
  const lines = [head, head.map(() => '---'), ...body].map((cols) => `| ${cols.join(' | ')} |`);
  return lines.join('\n');
}
