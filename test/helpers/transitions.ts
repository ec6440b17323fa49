import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The model of a stage as docs/design.md writes it: the states (the first
 * column of the table under "The states of a stage") and every row of its
 * transition tables (`| from | event | script | to |`: the stage's moves and
 * the resource gates' moves). A "from" of `any` is every state; a "to" of
 * several states lands in one of them.
 */
export interface Move {
  /** The row as written, for messages. */
  row: string;
  from: string[];
  event: string;
  to: string[];
}

const DESIGN = join(__dirname, '..', '..', 'docs', 'design.md');

/** The cells of a table row (`| a | b |`); no cell of these tables holds ` | `. */
const cellsOf = (line: string) =>
  line
    .trim()
    .replace(/^\|\s*/, '')
    .replace(/\s*\|$/, '')
    .split(/\s+\|\s+/);

/** The body rows of every table whose header row is `header`. */
function tables(lines: string[], header: string): string[][][] {
  const out: string[][][] = [];
  lines.forEach((line, i) => {
    if (line.trim() !== header) return;
    const rows: string[][] = [];
    for (let k = i + 2; k < lines.length && lines[k]!.trim().startsWith('|'); k++) rows.push(cellsOf(lines[k]!));
    out.push(rows);
  });
  return out;
}

export function readStageModel(path = DESIGN): { states: string[]; moves: Move[] } {
  const lines = readFileSync(path, 'utf8').split('\n');
  const stateTables = tables(lines, '| state | what exists |');
  if (stateTables.length !== 1) throw new Error(`${path}: ${stateTables.length} state tables, not 1`);
  const states = stateTables[0]!.map((c) => c[0]!.replace(/\*\*/g, ''));
  const list = (cell: string, row: string) => {
    if (cell === 'any') return [...states];
    const named = cell.split(/,\s*/);
    for (const s of named) if (!states.includes(s)) throw new Error(`${path}: "${s}" is no state, in: ${row}`);
    return named;
  };
  const moves = tables(lines, '| from | event | script | to |')
    .flat()
    .map((c): Move => {
      const row = c.join(' | ');
      if (c.length !== 4) throw new Error(`${path}: a transition row of ${c.length} cells: ${row}`);
      return { row, from: list(c[0]!, row), event: c[1]!, to: list(c[3]!, row) };
    });
  return { states, moves };
}
