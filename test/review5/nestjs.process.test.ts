import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { client, closeClients, dropPrefix, isolated, redisOptions } from '../helpers/redis';

/** Review of 13.2: a Nest app whose start failed leaves nothing open; its process ends by itself. */
const ROOT = join(__dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const DEADLINE_MS = 20_000;

function run(
  scenario: string,
  env: Record<string, string>,
): Promise<{ code: number | null; timedOut: boolean; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, [join(__dirname, 'fixtures', 'nest-child.ts'), scenario], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, DEADLINE_MS);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, timedOut, out });
    });
  });
}

const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await dropPrefix(client(), prefix);
  await closeClients();
});

describe('13.2 review: a failed start leaves nothing open', () => {
  it.each([
    ['factory-throws', /start failed: config service unavailable/],
    ['bad-options', /start failed: InvalidOptionsError/],
    ['executor-missing', /start failed: InvalidOptionsError/],
  ])(
    '13.2 review: %s: the start fails clearly and the process exits by itself',
    async (scenario, line) => {
      const { prefix, queueName } = isolated();
      prefixes.push(prefix);
      const o = redisOptions();
      const r = await run(scenario, { REDIS_URL: `redis://${o.host}:${o.port}`, PREFIX: prefix, QUEUE: queueName });
      expect(r.out).toMatch(line);
      expect({ timedOut: r.timedOut, code: r.code }).toEqual({ timedOut: false, code: 0 });
    },
    DEADLINE_MS + 10_000,
  );
});
