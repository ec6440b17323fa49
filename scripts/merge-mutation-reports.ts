/**
 * Merges Stryker incremental reports of runs over parts of the `mutate` list
 * (`stryker run --mutate src/x.ts --incrementalFile reports/part.json`) into
 * the committed reports/stryker-incremental.json, so that the next full
 * `npm run test:mutation` reuses every part's results. A later file wins for
 * a mutant (by mutator, replacement and place) or a test file that appears in
 * several; runs over parts of one file (`--mutate src/x.ts:1-200`) add up.
 *
 *   tsx scripts/merge-mutation-reports.ts reports/stryker-incremental.json reports/part-a.json reports/part-b.json
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

interface Report {
  files: Record<string, unknown>;
  testFiles?: Record<string, unknown>;
  [k: string]: unknown;
}

const [target, ...parts] = process.argv.slice(2);
if (!target || parts.length === 0) throw new Error('usage: merge-mutation-reports <target> <part>...');
const read = (p: string) => JSON.parse(readFileSync(p, 'utf8')) as Report;
const out: Report = existsSync(target) ? read(target) : { ...read(parts[0] as string), files: {}, testFiles: {} };
interface Mutant {
  id: string;
  mutatorName: string;
  replacement?: string;
  location: { start: { line: number; column: number }; end: { line: number; column: number } };
}
interface FileResult {
  source: string;
  mutants: Mutant[];
}
/** A mutant's identity across runs: what it does and where (ids are only unique within one run). */
const where = (m: Mutant) =>
  `${m.mutatorName}|${m.replacement ?? ''}|${m.location.start.line}:${m.location.start.column}-${m.location.end.line}:${m.location.end.column}`;
const ids = new Set<string>();
for (const f of Object.values(out.files) as FileResult[]) for (const m of f.mutants) ids.add(m.id);
let next = Math.max(0, ...[...ids].map(Number).filter(Number.isFinite)) + 1;
for (const p of parts) {
  const r = read(p);
  for (const [name, file] of Object.entries(r.files) as [string, FileResult][]) {
    const old = out.files[name] as FileResult | undefined;
    // a run over part of a file (`--mutate src/x.ts:1-200`) adds to the results of its other parts,
    // as long as the file's source is the same; a later result for the same mutant wins
    const kept = old && old.source === file.source ? old.mutants : [];
    const merged = new Map(kept.map((m) => [where(m), m]));
    for (const m of file.mutants) {
      const before = merged.get(where(m));
      const id = before ? before.id : ids.has(m.id) ? String(next++) : m.id;
      ids.add(id);
      merged.set(where(m), { ...m, id });
    }
    out.files[name] = { ...file, mutants: [...merged.values()] };
  }
  out.testFiles = { ...(out.testFiles ?? {}), ...(r.testFiles ?? {}) };
}
writeFileSync(target, JSON.stringify(out, null, 2));
console.log(
  `${target}: ${Object.keys(out.files).length} source files, ${Object.keys(out.testFiles ?? {}).length} test files`,
);
