import { Cluster } from 'ioredis';
import { createDispatchEngine, InvalidOptionsError } from '../../src';
import * as lua from '../../src/lua/scripts';
import { hashTagOf, resolveOptions } from '../../src/options';

const executor = async () => ({ dispatched: true, jobs: 1, reason: null });

describe('on a Redis Cluster connection', () => {
  // lazyConnect: the check happens before anything is sent, so no server is needed here
  const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
    lazyConnect: true,
    clusterRetryStrategy: () => null,
  });
  cluster.on('error', () => undefined);
  afterAll(() => cluster.disconnect());

  it.each(['bull', 'app', '{}', '{}{stage}', 'a}{', '{stage'])('rejects the prefix %j at start-up', (prefix) => {
    let error: unknown;
    try {
      createDispatchEngine({ connection: cluster, prefix, queueName: 'q', executor });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as InvalidOptionsError).code).toBe('INVALID_OPTIONS');
    expect((error as Error).message).toMatch(/hash tag/);
  });

  it('names a tagged prefix to use instead', () => {
    expect(() => createDispatchEngine({ connection: cluster, prefix: 'app', queueName: 'q', executor })).toThrow(
      /'\{app\}'/,
    );
  });

  it.each([
    ['{stage}', 'q'],
    ['bull:{stage}', 'q'],
    ['bull', '{render}'],
  ])('accepts the prefix %j with queue %j', (prefix, queueName) => {
    // resolveOptions is the check createDispatchEngine runs before it opens anything
    expect(resolveOptions({ connection: cluster, prefix, queueName, executor }).prefix).toBe(prefix);
  });
});

describe('on a single Redis', () => {
  it('accepts a prefix without hash tag', () => {
    expect(resolveOptions({ connection: { host: '127.0.0.1', port: 6379 }, prefix: 'bull', executor }).prefix).toBe(
      'bull',
    );
  });
});

describe('hashTagOf', () => {
  it.each([
    ['{stage}:q:', 'stage'],
    ['a{b}c{d}:', 'b'],
    ['bull:{q}:', 'q'],
    ['{}{stage}:q:', null],
    ['bull:q:', null],
    ['{open:q:', null],
  ])('%j hashes by %j', (base, tag) => {
    expect(hashTagOf(base)).toBe(tag);
  });
});

describe('the Lua scripts', () => {
  const scripts = Object.entries(lua).filter(([, v]) => typeof v === 'string') as [string, string][];

  it('are all found', () => {
    expect(scripts.map(([name]) => name).sort()).toEqual([
      'BATCH',
      'CANCEL',
      'CLEAR',
      'DEFER',
      'EXTEND',
      'FAIL',
      'PROBE',
      'RETRIED',
    ]);
  });

  it.each(scripts)('%s touches only keys passed in KEYS', (_name, source) => {
    const calls = [...source.matchAll(/redis\.call\('(\w+)',\s*([^,)]+)/g)];
    expect(calls.length).toBeGreaterThan(0);
    // names a script may use for a key: KEYS[...] itself, or a local / parameter bound only to KEYS entries
    const bound = new Set<string>();
    for (const [, name] of source.matchAll(/local (\w+) = KEYS\[/g)) bound.add(name!);
    // or a job hash built from the queue base (`<prefix>:<queue>:`, passed in ARGV), as BullMQ's scripts
    // build theirs: it shares the slot of every KEYS entry under a hash-tagged prefix
    const base = new Set<string>();
    for (const [, name] of source.matchAll(/local (\w+) = ARGV\[\d+\]\s*$/gm)) base.add(name!);
    for (const [, name] of source.matchAll(/local (\w+) = ARGV\[\d+\] \.\. /g)) bound.add(name!);
    const fromBase = (arg: string) =>
      /^ARGV\[\d+\] \.\. /.test(arg) || [...base].some((b) => arg.startsWith(`${b} .. `));
    // the batch's functions take their keys as UPPER-CASE parameters; every call passes KEYS[...] there
    const keyParams = new Map<string, number[]>();
    for (const [, fn, params] of source.matchAll(/local function (\w+)\(([^)]*)\)/g)) {
      const names = params!.split(',').map((p) => p.trim());
      const positions = names.flatMap((n, i) => (/^[A-Z]+$/.test(n) ? [i] : []));
      for (const i of positions) bound.add(names[i]!);
      keyParams.set(fn!, positions);
    }
    for (const [, fn, args] of source.matchAll(/(\w+)\(((?:KEYS|BASE)[^)]*\)?)\)/g)) {
      const list = args!.split(',').map((a) => a.trim());
      for (const i of keyParams.get(fn!) ?? [])
        expect({ fn, arg: list[i], ok: /^KEYS\[/.test(list[i]!) || fromBase(list[i]!) }).toEqual({
          fn,
          arg: list[i],
          ok: true,
        });
    }
    for (const [, command, firstArg] of calls) {
      const key = firstArg!.trim();
      expect({ command, key, ok: /^KEYS\[[^\]]+\]$/.test(key) || bound.has(key) }).toEqual({ command, key, ok: true });
    }
  });
});
