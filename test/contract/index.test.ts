/**
 * docs/contract.md and the test tree agree: every clause names folders that hold tests, every
 * folder of tests is named by a clause, and every test file's top-level titles start with the
 * clause of its folder (so `npm test -- C6` and a title both lead to the promise).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

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
/** The clauses naming a folder the file is in. */
const owners = (file: string) => all.filter((c) => c.folders.some((f) => file.startsWith(`${f}/`))).map((c) => c.id);

/** Names a test title is given under: jest's, and the suites' conditional forms of `describe`. */
const TEST_CALLS = new Set(['describe', 'it', 'test', 'maybe', 'describeWithRedisServer']);

/** The call's jest function, when it is one (`it`, `describe.skip`, `it.each([...])`, `(c ? describe : describe.skip)`). */
function jestCallee(e: ts.Expression): boolean {
  if (ts.isIdentifier(e)) return TEST_CALLS.has(e.text);
  if (ts.isPropertyAccessExpression(e)) return jestCallee(e.expression);
  if (ts.isCallExpression(e)) return jestCallee(e.expression); // it.each([...])(title, ...)
  if (ts.isParenthesizedExpression(e)) return jestCallee(e.expression);
  if (ts.isConditionalExpression(e)) return jestCallee(e.whenTrue) || jestCallee(e.whenFalse);
  return false;
}

/** Every test and describe of a file: its title as written (null: not a literal) and whether it is top-level. */
function titlesOf(path: string): { title: string | null; topLevel: boolean; line: number }[] {
  const sf = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
  const out: { title: string | null; topLevel: boolean; line: number }[] = [];
  const visit = (node: ts.Node, depth: number) => {
    if (ts.isCallExpression(node) && jestCallee(node.expression) && !ts.isCallExpression(node.parent)) {
      const arg = node.arguments[0];
      const title =
        arg && (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg))
          ? arg.text
          : arg && ts.isTemplateExpression(arg)
            ? arg.head.text
            : null;
      // (an it.each's table is its own call: only the call that takes the title counts)
      if (!(ts.isCallExpression(node.expression) && node.arguments.length === 1 && !title)) {
        out.push({ title, topLevel: depth === 0, line: sf.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
      }
      node.arguments.forEach((a) => visit(a, depth + 1));
      return;
    }
    ts.forEachChild(node, (child) => visit(child, depth));
  };
  visit(sf, 0);
  return out;
}

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
      return m !== null && (owners(f).length !== 1 || owner(f)?.id !== m[1]);
    });
    expect(misfiled).toEqual([]);
  });

  it("every test file's top-level titles start with a clause of its folder, and no title names another", () => {
    const wrong: string[] = [];
    for (const file of testFiles(join(ROOT, 'test')).map(rel)) {
      const allowed = owners(file);
      if (allowed.length === 0) continue;
      const found = titlesOf(join(ROOT, file));
      if (found.length === 0) wrong.push(`${file}: no test`);
      for (const t of found) {
        if (t.title === null) wrong.push(`${file}:${t.line}: a title that is not written out`);
        else if (t.topLevel && !allowed.some((c) => t.title!.startsWith(`${c}:`)))
          wrong.push(`${file}:${t.line}: ${t.title}`);
        else if (/^C\d+:/.test(t.title) && !allowed.some((c) => t.title!.startsWith(`${c}:`)))
          wrong.push(`${file}:${t.line}: names another clause: ${t.title}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
