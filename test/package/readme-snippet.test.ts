import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * the README's "Register it in an existing BullMQ setup" snippet
 * is what a newcomer pastes first. It must compile as it stands in an ESM
 * project (`"type": "module"`, `nodenext`) and in a CommonJS one: no default
 * import of ioredis used as a constructor (not constructable under ESM
 * `nodenext`), no top-level await (refused under CommonJS). The package
 * resolves to this repository's sources through `paths`.
 */
const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const SECTION = '## Register it in an existing BullMQ setup';

/** The first ```ts block after the section's heading. */
function readmeSnippet(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const at = readme.indexOf(`\n${SECTION}\n`);
  if (at < 0) throw new Error(`README.md has no "${SECTION}" section`);
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block) throw new Error(`README.md's "${SECTION}" has no \`\`\`ts block`);
  return block[1]!;
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sd-readme-'));
  // the consumer's dependencies: this repository's (bullmq, ioredis, @types/node)
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type Flavour = 'esm' | 'cjs';

/** Writes `source` into a project of that flavour and type-checks it; resolves with tsc's output, rejects on errors. */
async function typeCheck(name: string, flavour: Flavour, source: string): Promise<string> {
  const project = join(dir, name);
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name, private: true, type: flavour === 'esm' ? 'module' : 'commonjs' }),
  );
  writeFileSync(join(project, 'index.ts'), source);
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        // nodenext reads package.json's "type": index.ts is an ES module or a CommonJS one
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'ES2022',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(dir, 'node_modules', '@types')],
        paths: { 'bullmq-stage-deferral': [join(ROOT, 'src', 'index.ts')] },
      },
      files: ['index.ts'],
    }),
  );
  try {
    const { stdout } = await run(process.execPath, [TSC, '-p', project], { timeout: 120_000 });
    return stdout;
  } catch (error) {
    const e = error as { stdout?: string; message: string };
    throw new Error(`tsc (${flavour}) failed on ${name}/index.ts:\n${e.stdout ?? e.message}`);
  }
}

describe('C30: the README snippet compiles as pasted', () => {
  it('it is the one we think it is', () => {
    const snippet = readmeSnippet();
    expect(snippet).toContain("from 'bullmq-stage-deferral'");
    expect(snippet).toContain("import { Redis } from 'ioredis'");
    expect(snippet).toContain('createDispatchEngine(');
    expect(snippet).toContain('engine.processor');
  });

  it.each<Flavour>(['esm', 'cjs'])(
    'it type-checks in a %s project (module and moduleResolution nodenext)',
    async (flavour) => {
      await expect(typeCheck(`snippet-${flavour}`, flavour, readmeSnippet())).resolves.toBe('');
    },
    120_000,
  );

  it('the check catches what the old snippet did (default import as a constructor, top-level await)', async () => {
    // without this, a check that passes everything would pass too
    const old = [
      "import IORedis from 'ioredis';",
      "const connection = new IORedis('redis://127.0.0.1:6379');",
      'await connection.ping();',
      'export {};',
    ].join('\n');
    await expect(typeCheck('old-esm', 'esm', old)).rejects.toThrow(/TS2351/); // not constructable
    await expect(typeCheck('old-cjs', 'cjs', old)).rejects.toThrow(/TS1309|TS1378/); // top-level await
  }, 120_000);
});
