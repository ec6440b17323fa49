import type { DeferredStage } from '../types';
import { escapeControl } from './escape';
import type { StageState } from './read';
import { formatRefText } from './ref-text';
import { formatRemaining, renderTable } from './table';

/**
 * What the CLI prints. Tables and messages escape control characters
 * (`escapeControl`); `--json` prints the exact strings.
 */

export function print(text: string) {
  process.stdout.write(`${text}\n`);
}

export function deferredJson(d: DeferredStage, now: number) {
  return {
    ref: formatRefText(d.ref),
    scope: d.ref.scope,
    stage: d.ref.stage,
    reason: d.reason,
    class: d.class,
    deferrals: d.deferrals,
    until: new Date(d.until).toISOString(),
    remainingMs: Math.max(0, d.until - now),
    wakeUpJobId: d.wakeUpJobId,
  };
}

export function listTable(rows: readonly DeferredStage[], now: number): string {
  return renderTable(
    ['STAGE', 'CLASS', 'REASON', 'DEFERRALS', 'UNTIL', 'IN'],
    rows.map((d) => [
      formatRefText(d.ref),
      d.class,
      d.reason,
      String(d.deferrals),
      new Date(d.until).toISOString(),
      formatRemaining(d.until - now),
    ]),
  );
}

/** `show`'s object: the stage, its state, and what explains it. */
export function stageJson(
  base: { ref: string; scope: readonly string[]; stage: string; stageId: string },
  s: StageState,
  now: number,
) {
  const { deferred, state, ...rest } = s;
  return { ...base, ...(deferred && deferredJson(deferred, now)), state, ...rest };
}

export function showText(info: ReturnType<typeof stageJson>): string {
  const rows: [string, string | undefined][] = [
    ['stage', info.ref],
    ['stage id', info.stageId],
    ['state', info.state],
    ['reason', info.reason],
    ['class', info.class],
    ['deferrals', info.deferrals === undefined ? undefined : String(info.deferrals)],
    ['until', info.until && `${info.until} (in ${formatRemaining(info.remainingMs ?? 0)})`],
    ['wake-up job', info.wakeUpJobId],
    ['job', info.jobId && `${info.jobId} (${info.jobState})`],
    ['failed', info.failedReason],
  ];
  const shown = rows.filter((r): r is [string, string] => r[1] !== undefined);
  const width = Math.max(...shown.map(([k]) => k.length));
  const lines = shown.map(([k, v]) => `${k.padEnd(width)}  ${escapeControl(v)}`);
  if (info.log && info.log.length > 0) lines.push('log:', ...info.log.map((l) => `  ${escapeControl(l)}`));
  return lines.join('\n');
}

/** A shell word: the cursor printed for the next page, safe to paste. */
export function shellQuote(text: string): string {
  return /^[A-Za-z0-9_\-./@%:=+,]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}
