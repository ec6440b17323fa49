/**
 * docs/contract.md and the test tree agree: every clause names folders that hold tests, every
 * folder of tests is named by a clause, and every test file's top-level titles start with the
 * clause of its folder (so `npm test -- C6` and a title both lead to the promise).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const CONTRACT = readFileSync(join(ROOT, 'docs', 'contract.md'), 'utf8');

interface Clause {
  id: string;
  folders: string[];
}

export function clauses(text: string): Clause[] {
  const found: Clause[] = [];
  for (const m of text.matchAll(/^\*\*(C\d+) — [\s\S]*?^Tests: ([^\n]*)$/gm)) {
    const folders = [...m[2]!.matchAll(/`([^`]+)`/g)].map((f) => f[1]!.replace(/\/$/, ''));
    found.push({ id: m[1]!, folders });
  }
  return found;
}

function testFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return testFiles(path);
    return name.endsWith('.test.ts') ? [path] : [];
  });
}

const all = clauses(CONTRACT);
const rel = (p: string) => relative(ROOT, p).split('\\').join('/');
const owner = (file: string) => all.find((c) => c.folders.some((f) => file.startsWith(`${f}/`)));

describe('docs/contract.md and the test tree', () => {
  it('numbers its clauses C1 … Cn, each once, in order', () => {
    expect(all.length).toBeGreaterThan(20);
    expect(all.map((c) => c.id)).toEqual(all.map((_, i) => `C${i + 1}`));
  });

  it.each(all.map((c) => [c.id, c] as const))('%s names folders that hold tests', (_id, clause) => {
    expect(clause.folders.length).toBeGreaterThan(0);
    for (const folder of clause.folders) {
      expect(testFiles(join(ROOT, folder)).length).toBeGreaterThan(0);
    }
  });

  it('every folder of tests is named by a clause, and a clause folder test/contract/Cn-… by Cn', () => {
    const files = testFiles(join(ROOT, 'test'))
      .map(rel)
      .filter((f) => f !== 'test/contract/index.test.ts');
    const orphans = files.filter((f) => !owner(f));
    expect(orphans).toEqual([]);
    const misfiled = files.filter((f) => {
      const m = /^test\/contract\/(C\d+)-/.exec(f);
      return m !== null && owner(f)?.id !== m[1];
    });
    expect(misfiled).toEqual([]);
  });

  it("every test file's top-level titles start with its clause", () => {
    const wrong: string[] = [];
    for (const file of testFiles(join(ROOT, 'test')).map(rel)) {
      const clause = owner(file);
      if (!clause) continue;
      const text = readFileSync(join(ROOT, file), 'utf8');
      // a call at column 0: describe/it/test (maybe .each(…), .skip, or chosen by a condition), or the
      // title line of a multi-line it.each([…])
      const call =
        /^(?:(?:[^\s/*][^\n]*?)?\b(?:describe\w*|it|test|maybe)(?:\.each\([^\n]*?\)|\.skip|\.only)?\)?|\]\))\(\s*(['"`])(.*?)\1/gm;
      const titles = [...text.matchAll(call)].map((m) => m[2]!);
      if (titles.length === 0) wrong.push(`${file}: no top-level title`);
      for (const t of titles) if (!t.startsWith(`${clause.id}:`)) wrong.push(`${file}: ${t}`);
    }
    expect(wrong).toEqual([]);
  });
});
