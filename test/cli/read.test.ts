import type { DispatchEngine } from '../../src';
import { readStage } from '../../src/cli/read';
import { listStages } from '../../src/store/listing';
import { ioReader, QueueKeys, type Cmd, type Reader } from '../../src/store/reader';
import { buildOnce } from '../helpers/build';
import { closeFileEngine, fileEngine } from '../helpers/engine';
import { client, isolated } from '../helpers/redis';
import { cliOn } from './run';

const STAGES = 2000;
/** Each stage's payload: 2,000 stages carry 4 MB; a read that loads them all cannot stay under the bounds below. */
const PAYLOAD = 'p'.repeat(2048);
const q = isolated();
const keys = new QueueKeys(q.prefix, q.queueName);
let engine: DispatchEngine;

/** A Reader that records every command and the size of every reply. */
function counting(): Reader & { commands: Cmd[]; replyBytes: number } {
  const inner = ioReader(client());
  const self = {
    commands: [] as Cmd[],
    replyBytes: 0,
    async run(commands: readonly Cmd[]) {
      self.commands.push(...commands);
      const replies = await inner.run(commands);
      self.replyBytes += JSON.stringify(replies).length;
      return replies;
    },
  };
  return self;
}

const sidOf = (i: number) => `big/s-${i}/image`;

beforeAll(async () => {
  buildOnce();
  // by hand, not harness(): one engine fills the queue the CLI binary reads, for every test of the file
  engine = fileEngine(q, { jobLog: true }); // `show` reads the wake-up's log
  for (let i = 0; i < STAGES; i += 200) {
    await Promise.all(
      Array.from({ length: 200 }, (_, j) =>
        engine.dispatchStage({ scope: ['big', `s-${i + j}`], stage: 'image' }, { blob: PAYLOAD }),
      ),
    );
  }
  expect(await client().zcard(keys.index)).toBe(STAGES);
}, 120_000);

afterAll(() => closeFileEngine(engine, q.prefix));

describe('C29: show reads one stage only', () => {
  it('show of one stage among 2,000 in its scope reads only that stage', async () => {
    const reader = counting();
    const s = await readStage(reader, keys, sidOf(1234));
    expect(s.state).toBe('deferred');
    expect(s.deferred).toMatchObject({
      ref: { scope: ['big', 's-1234'], stage: 'image' },
      reason: 'no_worker_available',
    });
    expect(s.deferred!.wakeUpJobId.startsWith(`${sidOf(1234)}@cap.1.`)).toBe(true);
    expect(s.log).toHaveLength(1);
    expect(reader.commands.length).toBeLessThanOrEqual(8);
    // every key or range it read is this stage's (or the licence index, ranged to this stage)
    for (const c of reader.commands) {
      const stageArgs = c.slice(1).filter((a): a is string => typeof a === 'string' && a.includes('big/'));
      for (const a of stageArgs) expect({ c: c[0], a }).toEqual({ c: c[0], a: expect.stringContaining(sidOf(1234)) });
    }
    // the payload itself never leaves Redis
    expect(reader.replyBytes).toBeLessThan(PAYLOAD.length);
  });

  it('show of an idle stage in the same scope reads no other stage', async () => {
    const reader = counting();
    expect((await readStage(reader, keys, 'big/s-99999/image')).state).toBe('idle');
    expect(reader.replyBytes).toBeLessThan(1000);
  });

  it('the CLI shows that stage correctly', async () => {
    const r = await cliOn(q, '--json', 'show', 'big/s-1999:image');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ state: 'deferred', stageId: sidOf(1999), deferrals: 1 });
  });
});

describe('C29: list pages and never loads payloads', () => {
  it('pages through every stage with limit and cursor, reading no payload', async () => {
    const reader = counting();
    const seen = new Set<string>();
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await listStages(reader, keys, 'big/', { limit: 700, ...(cursor && { cursor }) });
      expect(page.stages.length).toBeLessThanOrEqual(700);
      for (const d of page.stages) seen.add(d.ref.scope[1]!);
      cursor = page.nextCursor ?? undefined;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(seen.size).toBe(STAGES);
    // 2,000 payloads are 4 MB; what list reads is a few hundred bytes a stage
    expect(reader.replyBytes).toBeLessThan(STAGES * 400);
  });

  it('the CLI prints one page and the cursor of the next', async () => {
    const first = await cliOn(q, '--json', 'list', 'big', '--limit', '5');
    expect(first.code).toBe(0);
    const a = JSON.parse(first.stdout) as { stages: { ref: string }[]; nextCursor: string };
    expect(a.stages).toHaveLength(5);
    expect(a.nextCursor.startsWith('big/')).toBe(true);
    const second = await cliOn(q, '--json', 'list', 'big', '--limit', '5', '--cursor', a.nextCursor);
    const b = JSON.parse(second.stdout) as { stages: { ref: string }[] };
    expect(b.stages).toHaveLength(5);
    expect(b.stages.filter((s) => a.stages.some((x) => x.ref === s.ref))).toEqual([]);
    const table = await cliOn(q, 'list', 'big', '--limit', '3');
    expect(table.stdout.trimEnd().split('\n')).toHaveLength(5); // header, 3 rows, the cursor line
    expect(table.stdout).toMatch(/\nnext page: --cursor big\/s-\d+\/image@cap\.1\.0\.0\.[0-9a-z]+\n$/);
  });

  it('refuses a cursor from another scope (exit 2)', async () => {
    const r = await cliOn(q, 'list', 'big', '--cursor', 'other/x@cap.1.0.0.abc');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/is not a cursor of this listing/);
  });
});
