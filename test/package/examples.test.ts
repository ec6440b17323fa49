import { runToExit } from '../helpers/process';
import { client, closeClients, dropPrefix, redisOptions } from '../helpers/redis';

/**
 * an example a newcomer runs first must end by itself. A
 * connection left open (the Worker's duplicate was) keeps Node alive forever.
 */
const DEADLINE_MS = 30_000;
/** The examples' queues, under their fixed prefixes `myapp` and `myapp-nest`. */
const EXAMPLE_KEYS = ['myapp:stage-dispatch', 'myapp-nest:stage-dispatch'];

function redisUrl(): string {
  const o = redisOptions();
  return `redis://${o.password ? `:${encodeURIComponent(o.password)}@` : ''}${o.host}:${o.port}`;
}

/** Runs `npx tsx <file>`; resolves with its exit, or with `timedOut` (its process group killed) after the deadline. */
const runExample = (file: string) => runToExit('npx', ['tsx', file], { REDIS_URL: redisUrl() }, DEADLINE_MS);

async function dropExampleKeys() {
  for (const keys of EXAMPLE_KEYS) await dropPrefix(client(), keys);
}

beforeAll(dropExampleKeys);
afterAll(async () => {
  await dropExampleKeys();
  await closeClients();
});

describe('C30: every example exits by itself', () => {
  it(
    'examples/existing-setup.ts enqueues, dispatches through its own Worker, shuts down and exits 0',
    async () => {
      const started = Date.now();
      const r = await runExample('examples/existing-setup.ts');
      expect({ timedOut: r.timedOut, code: r.code, signal: r.signal }).toEqual({
        timedOut: false,
        code: 0,
        signal: null,
      });
      expect(Date.now() - started).toBeLessThan(DEADLINE_MS);
      // it did its work before it exited: the job was added and its Worker ran the executor
      expect(r.out).toMatch(/added: true/);
      expect(r.out).toMatch(/^dispatching /m);
    },
    DEADLINE_MS + 10_000,
  );

  it(
    'examples/nestjs/main.ts defers a stage through its @Processor, its wake-up dispatches it on the same Worker, app.close() and exit 0',
    async () => {
      const r = await runExample('examples/nestjs/main.ts');
      expect({ timedOut: r.timedOut, code: r.code, signal: r.signal }).toEqual({
        timedOut: false,
        code: 0,
        signal: null,
      });
      expect(r.out).toMatch(/added: true/);
      expect(r.out).toMatch(/^deferred no_capacity/m);
      expect(r.out).toMatch(/^job \S+@r\.\S+ completed \(no_capacity\)/m);
      expect(r.out).toMatch(/^delayed jobs on the queue: 1$/m);
      expect(r.out).toMatch(/reason: 'deferred'/);
      expect(r.out).toMatch(/^rendering book-1\/ch-2\/sc-7 image/m);
      expect(r.out).toMatch(/^dispatched book-1\/ch-2\/sc-7 image/m);
      expect(r.out).toMatch(/^job \S+@cap\.\S+ dispatched$/m);
    },
    DEADLINE_MS + 10_000,
  );
});
