import { readFileSync, writeFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constantOf, scriptFiles } from '../../scripts/gen-lua';
import * as generated from '../../src/lua/generated';
import { ROOT } from '../helpers/build';
import { packedConsumer, redisUrl, sh as shIn, TSC, type Consumer } from '../helpers/pack';
import { client, closeClients, dropPrefix, isolated } from '../helpers/redis';

/** The files a producer in another language reads, and the Python producer. */
const CONTRACT = [
  'python/bullmq_stage_deferral.py',
  'schema/dispatch-job-data.v1.json',
  'src/lua/enqueue-probe.lua',
  'test/vectors/stage-ids.json',
];

let consumer: Consumer;
let dir: string;
let tarball: string;
let packed: { files: { path: string }[] };

const sh = (file: string, args: string[], cwd = dir) => shIn(file, args, cwd);

beforeAll(async () => {
  consumer = await packedConsumer('sd-consumer');
  ({ dir, tarball } = consumer);
  packed = { files: consumer.files.map((path) => ({ path })) };
}, 240_000);

afterAll(() => consumer?.remove());

describe('C30: the packed package', () => {
  it('holds the build, the manifest and the docs, not the sources or tests (but the producer contract files)', () => {
    const paths = packed.files.map((f) => f.path).sort();
    expect(paths).toEqual(
      expect.arrayContaining(['dist/cli.js', 'dist/index.d.mts', 'dist/index.d.ts', 'dist/index.js', 'dist/index.mjs']),
    );
    expect(
      paths.filter(
        (p) =>
          !p.startsWith('dist/') &&
          !/^(package\.json|README\.md|LICENSE|CHANGELOG\.md|docs\/[a-z-]+\.md)$/.test(p) &&
          !CONTRACT.includes(p),
      ),
    ).toEqual([]);
    const manifest = JSON.parse(
      readFileSync(join(dir, 'node_modules', 'bullmq-stage-deferral', 'package.json'), 'utf8'),
    );
    expect(manifest).toMatchObject({ sideEffects: false, engines: { node: expect.any(String) } });
  });

  it('ships the producer contract (JSON Schema, enqueue probe, stage-id vectors), resolvable by subpath', async () => {
    expect(packed.files.map((f) => f.path)).toEqual(expect.arrayContaining(CONTRACT));
    const script = [
      "const { readFileSync } = require('node:fs');",
      "for (const p of ['schema/dispatch-job-data.v1.json', 'lua/enqueue-probe.lua', 'vectors/stage-ids.json'])",
      "  console.log(readFileSync(require.resolve('bullmq-stage-deferral/' + p), 'utf8').length > 0);",
    ].join('\n');
    const { stdout } = await sh(process.execPath, ['-e', script]);
    expect(stdout.trim().split('\n')).toEqual(['true', 'true', 'true']);
    const installed = join(dir, 'node_modules', 'bullmq-stage-deferral');
    expect(readFileSync(join(installed, 'src/lua/enqueue-probe.lua'), 'utf8')).toBe(
      readFileSync(join(ROOT, 'src/lua/enqueue-probe.lua'), 'utf8'),
    );
  });

  it('C30: the installed Python producer finds the probe beside it and adds a job (/usr/bin/python3, redis-py only)', async () => {
    const { prefix, queueName } = isolated();
    const producer = join(dir, 'node_modules', 'bullmq-stage-deferral', 'python', 'bullmq_stage_deferral.py');
    const args = ['--redis', redisUrl(), '--prefix', prefix, '--queue', queueName, '--scope', 'b', '--stage', 'image'];
    try {
      const { stdout } = await sh('/usr/bin/python3', [producer, ...args], tmpdir());
      expect(JSON.parse(stdout)).toEqual({
        added: true,
        reason: null,
        jobId: expect.stringMatching(/^b\/image@r\./),
        payloadTaken: true,
      });
    } finally {
      await dropPrefix(client(), prefix);
      await closeClients();
    }
  });

  it("ships every script of the engine flattened (its includes in place) as dist/lua/<name>.lua, the text the engine runs, resolvable as 'lua/<name>.lua'", async () => {
    const paths = packed.files.map((f) => f.path);
    const installed = join(dir, 'node_modules', 'bullmq-stage-deferral');
    const scripts = scriptFiles();
    expect(scripts).toEqual(expect.arrayContaining(['batch.lua', 'defer.lua', 'enqueue-probe.lua']));
    for (const file of scripts) {
      expect(paths).toContain(`dist/lua/${file}`);
      const text = readFileSync(join(installed, 'dist/lua', file), 'utf8');
      expect([file, text]).toEqual([file, (generated as Record<string, string>)[constantOf(file)]]);
      expect(text).not.toContain('@include');
    }
    const script = `for (const f of ${JSON.stringify(scripts)}) console.log(require.resolve('bullmq-stage-deferral/lua/' + f));`;
    const { stdout } = await sh(process.execPath, ['-e', script]);
    expect(stdout.trim().split('\n')).toEqual(scripts.map((f) => join(installed, 'dist/lua', f)));
  });

  it('ships the MIT LICENSE and says where the repository, homepage and issues are', () => {
    const paths = packed.files.map((f) => f.path);
    expect(paths).toContain('LICENSE');
    const installed = join(dir, 'node_modules', 'bullmq-stage-deferral');
    const license = readFileSync(join(installed, 'LICENSE'), 'utf8');
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) 2026 bullmq-stage-deferral contributors\n/);
    const repo = 'https://github.com/bullmq-stage-deferral/bullmq-stage-deferral';
    expect(JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'))).toMatchObject({
      license: 'MIT',
      repository: { type: 'git', url: `git+${repo}.git` },
      homepage: `${repo}#readme`,
      bugs: { url: `${repo}/issues` },
    });
  });

  it('ships the docs the README links to, and every relative link of README, CHANGELOG and docs names a shipped file', () => {
    const installed = join(dir, 'node_modules', 'bullmq-stage-deferral');
    const docs = packed.files.map((f) => f.path).filter((p) => /^docs\/.*\.md$/.test(p));
    expect(docs).toEqual(expect.arrayContaining(['docs/guide.md', 'docs/reference.md', 'docs/contract.md']));
    let relative = 0;
    for (const file of ['README.md', 'CHANGELOG.md', ...docs]) {
      const text = readFileSync(join(installed, file), 'utf8');
      // no link to a repository that is not published
      expect([file, text.includes('github.com/bullmq-stage-deferral')]).toEqual([file, false]);
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^https?:\/\//.test(target!) || target!.startsWith('#')) continue;
        relative++;
        const path = join(installed, file, '..', target!.replace(/#.*$/, ''));
        expect([file, target, existsSync(path)]).toEqual([file, target, true]);
      }
    }
    expect(relative).toBeGreaterThan(10);
  });

  it('loads from CommonJS require (dist/index.js)', async () => {
    const script = [
      "const m = require('bullmq-stage-deferral');",
      "const assert = require('node:assert');",
      "assert.match(require.resolve('bullmq-stage-deferral'), /dist[\\\\/]index\\.js$/);",
      "assert.strictEqual(typeof m.createDispatchEngine, 'function');",
      "assert.strictEqual(m.stageId({ scope: ['book 1'], stage: 'image' }), 'book%201/image');",
      "assert.throws(() => m.stageId({ scope: [], stage: 'x' }), (e) => e instanceof m.InvalidStageRefError && e.code === 'INVALID_STAGE_REF');",
      "console.log('cjs ok');",
    ].join('\n');
    writeFileSync(join(dir, 'check.cjs'), script);
    const { stdout } = await sh(process.execPath, ['check.cjs']);
    expect(stdout.trim()).toBe('cjs ok');
  });

  it('loads from ESM import (dist/index.mjs) and defers a stage against Redis', async () => {
    const { prefix, queueName } = isolated();
    const script = [
      "import { createDispatchEngine, stageId, isStageDeferralError, StageDeferralError } from 'bullmq-stage-deferral';",
      "import IORedis from 'ioredis';",
      "import assert from 'node:assert';",
      "assert.match(import.meta.resolve('bullmq-stage-deferral'), /dist\\/index\\.mjs$/);",
      "assert.strictEqual(stageId({ scope: ['a/b'], stage: 'image' }), 'a%2Fb/image');",
      "assert.ok(isStageDeferralError(new StageDeferralError('INVALID_OPTIONS', 'x')));",
      `const connection = new IORedis(${JSON.stringify(redisUrl())});`,
      `const engine = createDispatchEngine({ connection, prefix: '${prefix}', queueName: '${queueName}',`,
      "  executor: async () => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }) });",
      "const r = await engine.dispatchStage({ scope: ['book-1'], stage: 'image' }, null);",
      "assert.strictEqual(r.reason, 'no_worker_available');",
      'const [d] = await engine.listDeferred();',
      "assert.strictEqual(d.class, 'capacity');",
      'await engine.close();',
      'await connection.quit();',
      "console.log('esm ok', d.wakeUpJobId);",
    ].join('\n');
    writeFileSync(join(dir, 'check.mjs'), script);
    try {
      const { stdout } = await sh(process.execPath, ['check.mjs']);
      expect(stdout.trim()).toMatch(/^esm ok book-1\/image@cap\.1\.0\.0\./);
    } finally {
      await dropPrefix(client(), prefix);
      await closeClients();
    }
  });

  it('type-checks a TypeScript consumer under node16 (CJS and ESM) and bundler resolution', async () => {
    const consumer = [
      "import { createDispatchEngine, stageId, type DispatchEngine, type ExecutorResult, type StageRef } from 'bullmq-stage-deferral';",
      "const ref: StageRef = { scope: ['book-1'], stage: 'image' };",
      'const id: string = stageId(ref);',
      "export function make(connection: import('ioredis').Redis): DispatchEngine<{ n: number }> {",
      '  return createDispatchEngine<{ n: number }>({',
      '    connection,',
      "    executor: async (): Promise<ExecutorResult> => ({ dispatched: false, jobs: 0, reason: 'no_worker_available' }),",
      '  });',
      '}',
      '// @ts-expect-error the stage must be a string: proves the declarations are read, not `any`',
      "stageId({ scope: ['a'], stage: 1 });",
      'export { id };',
    ].join('\n');
    writeFileSync(join(dir, 'consumer.ts'), consumer);
    writeFileSync(join(dir, 'consumer-esm.mts'), consumer);
    const base = { strict: true, noEmit: true, skipLibCheck: true, target: 'ES2022', types: ['node'] };
    writeFileSync(
      join(dir, 'tsconfig.node16.json'),
      JSON.stringify({
        compilerOptions: { ...base, module: 'node16', moduleResolution: 'node16' },
        files: ['consumer.ts', 'consumer-esm.mts'],
      }),
    );
    writeFileSync(
      join(dir, 'tsconfig.bundler.json'),
      JSON.stringify({
        compilerOptions: { ...base, module: 'esnext', moduleResolution: 'bundler' },
        files: ['consumer.ts'],
      }),
    );
    await sh(process.execPath, [TSC, '-p', 'tsconfig.node16.json']);
    await sh(process.execPath, [TSC, '-p', 'tsconfig.bundler.json']);
    // the same consumer with a real type error must fail, or the checks above prove nothing
    writeFileSync(
      join(dir, 'broken.ts'),
      "import { stageId } from 'bullmq-stage-deferral';\nconst n: number = stageId({ scope: ['a'], stage: 'b' });\nexport { n };\n",
    );
    writeFileSync(
      join(dir, 'tsconfig.broken.json'),
      JSON.stringify({
        compilerOptions: { ...base, module: 'node16', moduleResolution: 'node16' },
        files: ['broken.ts'],
      }),
    );
    await expect(sh(process.execPath, [TSC, '-p', 'tsconfig.broken.json'])).rejects.toThrow(/TS2322/);
  }, 120_000);

  it('the nestjs subpath needs @nestjs/*, the main entry never does', async () => {
    expect(packed.files.map((f) => f.path)).toEqual(
      expect.arrayContaining(['dist/nestjs.js', 'dist/nestjs.mjs', 'dist/nestjs.d.ts', 'dist/nestjs.d.mts']),
    );
    // no @nestjs in the consumer (yet): the main entry loads, the subpath says what it misses
    writeFileSync(
      join(dir, 'no-nest.cjs'),
      [
        "const assert = require('node:assert');",
        "assert.throws(() => require.resolve('@nestjs/common'));",
        "assert.strictEqual(typeof require('bullmq-stage-deferral').createDispatchEngine, 'function');",
        "assert.throws(() => require('bullmq-stage-deferral/nestjs'), (e) => e.code === 'MODULE_NOT_FOUND' && /@nestjs\\//.test(e.message));",
        "console.log('no-nest ok');",
      ].join('\n'),
    );
    expect((await sh(process.execPath, ['no-nest.cjs'])).stdout.trim()).toBe('no-nest ok');
  });

  it('installs the bin', async () => {
    const bin = join(dir, 'node_modules', '.bin', 'bullmq-stage-deferral');
    expect(existsSync(bin)).toBe(true);
    const { stdout } = await sh(bin, ['--help']);
    expect(stdout).toContain('Usage: bullmq-stage-deferral');
  });
});

describe('C30: bullmq and ioredis are peer dependencies', () => {
  let app: string;

  beforeAll(async () => {
    // an app that already runs BullMQ 5 with ioredis 5 adds the plugin (from the npm cache
    // once fetched; from the registry otherwise)
    app = mkdtempSync(join(tmpdir(), 'sd-bullmq5-app-'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    await sh(
      'npm',
      [
        'install',
        '--prefer-offline',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        'bullmq@5.81.5',
        'ioredis@5.11.1',
        '@types/node@20',
        tarball,
      ],
      app,
    );
  }, 240_000);

  afterAll(() => {
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it('the manifest names them as peers, and an app on bullmq 5.81 keeps its one bullmq and ioredis', () => {
    const manifest = JSON.parse(
      readFileSync(join(dir, 'node_modules', 'bullmq-stage-deferral', 'package.json'), 'utf8'),
    );
    expect(manifest.peerDependencies).toMatchObject({ bullmq: '^5.81.0 || ^6.0.0', ioredis: '^5.11.0 || ^6.0.0' });
    // every other peer (NestJS, for the ./nestjs subpath) is optional
    for (const name of Object.keys(manifest.peerDependencies).filter((n) => n !== 'bullmq' && n !== 'ioredis'))
      expect([name, manifest.peerDependenciesMeta?.[name]?.optional]).toEqual([name, true]);
    expect(manifest.dependencies).not.toHaveProperty('bullmq');
    expect(manifest.dependencies).not.toHaveProperty('ioredis');
    const version = (p: string) =>
      JSON.parse(readFileSync(join(app, 'node_modules', p, 'package.json'), 'utf8')).version;
    expect([version('bullmq'), version('ioredis')]).toEqual(['5.81.5', '5.11.1']);
    // no second copy inside the plugin (what made `tsc` see two Queue/Processor types)
    expect(existsSync(join(app, 'node_modules', 'bullmq-stage-deferral', 'node_modules', 'bullmq'))).toBe(false);
    expect(existsSync(join(app, 'node_modules', 'bullmq-stage-deferral', 'node_modules', 'ioredis'))).toBe(false);
  });

  it("the app's own Worker runs the plugin's processor on bullmq 5.81: it type-checks and a wake-up dispatches", async () => {
    const { prefix, queueName } = isolated();
    const script = [
      "import { Queue, Worker, type Processor } from 'bullmq';",
      "import { Redis } from 'ioredis';",
      "import { createDispatchEngine, type ExecutorResult } from 'bullmq-stage-deferral';",
      `const connection = new Redis(${JSON.stringify(redisUrl())});`,
      'const answers: ExecutorResult[] = [',
      "  { dispatched: false, jobs: 0, reason: 'no_worker_available' },",
      '  { dispatched: true, jobs: 1, reason: null },',
      '];',
      'let calls = 0;',
      'const engine = createDispatchEngine({',
      `  connection, prefix: '${prefix}', queueName: '${queueName}',`,
      '  windows: { capacitySeconds: 0.2, jitter: 0 },',
      '  executor: async () => answers[Math.min(calls++, 1)]!,',
      '});',
      'const queue: Queue = engine.queue;',
      'const processor: Processor = engine.processor;',
      'const workerConnection = connection.duplicate({ maxRetriesPerRequest: null });',
      `const worker = new Worker(queue.name, processor, { connection: workerConnection, prefix: '${prefix}' });`,
      "const first = await engine.dispatchStage({ scope: ['book-1'], stage: 'image' }, null);",
      "if (first.reason !== 'no_worker_available') throw new Error(`not deferred: ${JSON.stringify(first)}`);",
      'const deadline = Date.now() + 20_000;',
      'while (calls < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));',
      'await worker.close();',
      'await engine.close();',
      'workerConnection.disconnect();',
      'await connection.quit();',
      "console.log('calls', calls);",
    ].join('\n');
    writeFileSync(join(app, 'app.mts'), script);
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          target: 'ES2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          types: ['node'],
        },
        files: ['app.mts'],
      }),
    );
    try {
      await sh(process.execPath, [TSC, '-p', 'tsconfig.json'], app);
      const tsx = join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
      const { stdout } = await sh(process.execPath, [tsx, 'app.mts'], app);
      expect(stdout.trim()).toBe('calls 2');
    } finally {
      await dropPrefix(client(), prefix);
      await closeClients();
    }
  }, 120_000);
});
