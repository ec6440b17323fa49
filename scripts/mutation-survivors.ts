/**
 * Prints the scores and the surviving mutants of Stryker reports (incremental
 * or JSON), per file, as markdown rows for docs/testing.md:
 *
 *   tsx scripts/mutation-survivors.ts reports/stryker-incremental.json [more reports] [--file src/x.ts]
 *
 * The score is Stryker's: (killed + timeout) / (killed + timeout + survived +
 * no coverage); compile errors and ignored mutants (a `Stryker disable`
 * comment, with its reason) are not counted.
 */
import { readFileSync } from 'node:fs';

interface Mutant {
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: { line: number; column: number } };
}
interface Report {
  files: Record<string, { source: string; mutants: Mutant[] }>;
}

const args = process.argv.slice(2);
const only = args.includes('--file') ? args[args.indexOf('--file') + 1] : undefined;
const paths = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--file');
if (paths.length === 0) throw new Error('usage: mutation-survivors <report.json>... [--file src/x.ts]');

const detected = (s: string) => s === 'Killed' || s === 'Timeout';
const counted = (s: string) => detected(s) || s === 'Survived' || s === 'NoCoverage';

for (const path of paths) {
  const report = JSON.parse(readFileSync(path, 'utf8')) as Report;
  for (const [file, { source, mutants }] of Object.entries(report.files)) {
    if (only !== undefined && file !== only) continue;
    const lines = source.split('\n');
    const n = (status: string) => mutants.filter((m) => m.status === status).length;
    const scored = mutants.filter((m) => counted(m.status)).length;
    const score =
      scored === 0 ? 'n/a' : `${((100 * mutants.filter((m) => detected(m.status)).length) / scored).toFixed(1)} %`;
    console.log(
      `\n${file} (${path}): ${mutants.length} mutants, ${n('CompileError')} did not compile, ${n('Ignored')} ignored; ` +
        `killed ${n('Killed')}, timeout ${n('Timeout')}, survived ${n('Survived')}, no coverage ${n('NoCoverage')}: ${score}`,
    );
    for (const m of mutants.filter((x) => x.status === 'Survived' || x.status === 'NoCoverage')) {
      const line = m.location.start.line;
      const code = (lines[line - 1] ?? '').trim().replaceAll('|', '\\|');
      const to = (m.replacement ?? '').replaceAll('\n', ' ').replaceAll('|', '\\|').slice(0, 60);
      console.log(
        `| ${line} | ${m.mutatorName} → \`${to}\`${m.status === 'NoCoverage' ? ' (no coverage)' : ''} | \`${code.slice(0, 90)}\` |`,
      );
    }
  }
}
