import { join } from 'node:path';
import { ROOT, runToExit } from '../../helpers/process';
import { client, closeClients, dropPrefix, isolated, redisOptions } from '../../helpers/redis';

/** Check of 13.2: a Nest app whose start failed leaves nothing open; its process ends by itself. */
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const DEADLINE_MS = 20_000;

const run = (scenario: string, env: Record<string, string>) =>
  runToExit(TSX, [join(__dirname, 'fixtures', 'nest-child.ts'), scenario], env, DEADLINE_MS);

const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await dropPrefix(client(), prefix);
  await closeClients();
});

describe('C26: a failed start leaves nothing open', () => {
  it.each([
    ['factory-throws', /start failed: config service unavailable/],
    ['bad-options', /start failed: InvalidOptionsError/],
    ['executor-missing', /start failed: InvalidOptionsError/],
  ])(
    '%s: the start fails clearly and the process exits by itself',
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
