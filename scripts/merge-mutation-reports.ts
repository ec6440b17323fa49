/**
 * Merges Stryker incremental reports of runs over parts of the `mutate` list
 * (`stryker run --mutate src/x.ts --incrementalFile reports/part.json`) into
 * the committed reports/stryker-incremental.json, so that the next full
 * `npm run test:mutation` reuses every part's results. A later file wins for
 * a source or test file that appears in several.
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
for (const p of parts) {
  const r = read(p);
  Object.assign(out.files, r.files);
  out.testFiles = { ...(out.testFiles ?? {}), ...(r.testFiles ?? {}) };
}
writeFileSync(target, JSON.stringify(out, null, 2));
console.log(
  `${target}: ${Object.keys(out.files).length} source files, ${Object.keys(out.testFiles ?? {}).length} test files`,
);
