import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { redisOptions } from '../helpers/redis';

/**
 * `npm test` on a fresh machine. `pretest` runs
 * scripts/ensure-test-deps.sh (install chromium and redis-server where it can,
 * else one line saying how), and `npm test` goes through scripts/with-redis.sh
 * itself, which must not start a second Redis under `.ci/run`'s.
 *
 * The install path is driven with stubs (`id`, `apt-get`) on a PATH of their
 * own: nothing is installed on this machine. /usr/bin/chromium is checked by
 * its absolute path and cannot be hidden, so the stubs exercise redis-server;
 * both go through the same code.
 */
const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const BASH = '/bin/bash';
const ENSURE = join(ROOT, 'scripts', 'ensure-test-deps.sh');
const WITH_REDIS = join(ROOT, 'scripts', 'with-redis.sh');

let stubs: string;
beforeEach(() => {
  stubs = mkdtempSync(join(tmpdir(), 'sd-stubs-'));
});
afterEach(() => rmSync(stubs, { recursive: true, force: true }));

function stub(name: string, body: string): void {
  writeFileSync(join(stubs, name), `#!${BASH}\n${body}\n`);
  chmodSync(join(stubs, name), 0o755);
}

/** Runs bash `script args` with only the stubs on PATH; resolves with its exit code and output. */
async function runStubbed(script: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(BASH, [script, ...args], {
      env: { PATH: stubs, STUBS: stubs, LOG: join(stubs, 'apt.log') },
      timeout: 20_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout: string; stderr: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('C30: scripts/ensure-test-deps.sh', () => {
  it('not root: installs nothing, prints one line saying how, exits non-zero', async () => {
    stub('id', 'echo 1000');
    stub('apt-get', 'echo "$*" >> "$LOG"');
    const r = await runStubbed(ENSURE, ['redis-server']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toEqual([
      expect.stringContaining("install with 'sudo apt-get install -y redis-server'"),
    ]);
    expect(existsSync(join(stubs, 'apt.log'))).toBe(false);
  });

  it('root with apt-get: installs what is missing (apt-get update first when a plain install fails)', async () => {
    stub('id', 'echo 0');
    // the first install fails (stale package lists); after an update it installs redis-server
    stub(
      'apt-get',
      [
        'echo "$*" >> "$LOG"',
        'if [ "$1" = update ]; then : > "$STUBS/updated"; exit 0; fi',
        '[ -e "$STUBS/updated" ] || exit 100',
        `printf '#!${BASH}\\n' > "$STUBS/redis-server"; /bin/chmod +x "$STUBS/redis-server"`,
      ].join('\n'),
    );
    const r = await runStubbed(ENSURE, ['redis-server']);
    expect(r).toMatchObject({ code: 0, stdout: '' });
    expect(readFileSync(join(stubs, 'apt.log'), 'utf8').trimEnd().split('\n')).toEqual([
      'install -y -qq redis-server',
      'update -qq',
      'install -y -qq redis-server',
    ]);
    // a second run finds it and does nothing
    rmSync(join(stubs, 'apt.log'));
    expect(await runStubbed(ENSURE, ['redis-server'])).toEqual({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(join(stubs, 'apt.log'))).toBe(false);
  });

  it('an unknown dependency is a usage error', async () => {
    const r = await runStubbed(ENSURE, ['chromium-browser']);
    expect(r.code).toBe(2);
  });
});

describe('C30: npm test brings its own Redis and its dependencies', () => {
  const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
    .scripts;

  it('pretest runs ensure-test-deps.sh; test and demo go through with-redis.sh', () => {
    expect(scripts.pretest).toBe('bash scripts/ensure-test-deps.sh');
    expect(scripts.test).toBe('bash scripts/with-redis.sh bash scripts/test.sh');
    expect(scripts.demo).toMatch(/^bash scripts\/with-redis\.sh /);
  });

  it('npm test -- C6 runs the folders clause C6 names, and an unknown clause is exit 2', async () => {
    const testSh = (...args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((done) =>
        execFile(BASH, [join(ROOT, 'scripts', 'test.sh'), ...args], { cwd: ROOT }, (err, stdout, stderr) =>
          done({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        ),
      );
    const listed = await testSh('C6', '--listTests');
    expect(listed.code).toBe(0);
    const files = listed.stdout.trim().split('\n');
    expect(files.length).toBeGreaterThan(3);
    for (const f of files) expect(f).toContain('/test/contract/C6-sent-stays-sent/');
    const unknown = await testSh('C999');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('No clause C999');
  });

  it('with-redis.sh inside with-redis.sh (.ci/run around npm test) uses the outer Redis, starts none', async () => {
    const o = redisOptions();
    const url = `redis://${o.password ? `:${encodeURIComponent(o.password)}@` : ''}${o.host}:${o.port}`;
    const { stdout, stderr } = await run(
      BASH,
      [WITH_REDIS, BASH, WITH_REDIS, process.execPath, '-e', 'console.log(process.env.REDIS_URL)'],
      { cwd: ROOT, env: { ...process.env, REDIS_URL: url }, timeout: 20_000 },
    );
    expect(stdout.trim()).toBe(url);
    expect(stderr).not.toMatch(/Started a private redis-server/);
  });
});
