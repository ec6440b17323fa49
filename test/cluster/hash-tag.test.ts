import { Cluster } from 'ioredis';
import { createDispatchEngine, InvalidOptionsError } from '../../src';
import * as lua from '../../src/lua/scripts';
import { hashTagOf, resolveOptions } from '../../src/options';

const executor = async () => ({ dispatched: true, jobs: 1, reason: null });

describe('C21: on a Redis Cluster connection', () => {
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

describe('C21: on a single Redis', () => {
  it('accepts a prefix without hash tag', () => {
    expect(resolveOptions({ connection: { host: '127.0.0.1', port: 6379 }, prefix: 'bull', executor }).prefix).toBe(
      'bull',
    );
  });
});

describe('C21: hashTagOf', () => {
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

describe('C21: the Lua scripts', () => {
  const scripts = Object.entries(lua).filter(([, v]) => typeof v === 'string') as [string, string][];

  it('are all found', () => {
    expect(scripts.map(([name]) => name).sort()).toEqual([
      'BATCH',
      'CANCEL',
      'CLEAR',
      'DEFER',
      'EXTEND',
      'FAIL',
      'PERMISSIONS',
      'PROBE',
      'REPLACE',
      'WAKE',
    ]);
  });

  it.each(scripts)('%s touches only keys passed in KEYS, or job hashes under the queue base', (_name, source) => {
    const calls = [...source.matchAll(/redis\.p?call\('(\w+)',\s*([^,)]+)/g)];
    const tried = [...source.matchAll(/try\('(\w+)',\s*([^,)]+)/g)];
    expect(calls.length + tried.length).toBeGreaterThan(0);
    // names a script may use for a key: KEYS[...] itself, or a local / parameter bound only to KEYS entries
    const bound = new Set<string>();
    for (const [, name] of source.matchAll(/local (\w+) = KEYS\[/g)) bound.add(name!);
    // BASE is the queue base (`<prefix>:<queue>:`, from ARGV): `BASE .. <job id>` is a job hash, in the
    // queue's slot under a hash-tagged prefix, as BullMQ's own scripts build theirs
    const underBase = (arg: string) => /^(BASE|ARGV\[\d+\]) \.\. /.test(arg);
    for (const [, name] of source.matchAll(/local (\w+) = (?:BASE|ARGV\[\d+\]) \.\. /g)) bound.add(name!);
    // a kind's wait index, a resource's line or its gate, built from the queue base by
    // waitKey(BASE, sid), lineKey(BASE, resource), gateKey(BASE, resource) or turnKey(BASE, resource)
    const waitIndex = (arg: string) => /^(waitKey|lineKey|gateKey|turnKey)\((BASE|ARGV\[\d+\])$/.test(arg);
    expect(source).not.toMatch(/(waitKey|lineKey|gateKey|turnKey)\((?!BASE|ARGV\[\d+\])/);
    const helperKey = /local (\w+) = (?:[^\n]* and )?(?:waitKey|lineKey|gateKey|turnKey)\((?:BASE|ARGV\[\d+\]), /g;
    for (const [, name] of source.matchAll(helperKey)) bound.add(name!);
    // functions take their keys as UPPER-CASE parameters; every call passes KEYS[...] (or a job hash) there
    const keyParams = new Map<string, number[]>();
    for (const [, fn, params] of source.matchAll(/local function (\w+)\(([^)]*)\)/g)) {
      const names = params!.split(',').map((p) => p.trim());
      const positions = names.flatMap((n, i) => (/^[A-Z]+$/.test(n) && n !== 'BASE' ? [i] : []));
      for (const i of positions) bound.add(names[i]!);
      keyParams.set(fn!, positions);
    }
    for (const [, fn, args] of source.matchAll(/(\w+)\(((?:KEYS|BASE|IDX)[^)]*\)?)\)/g)) {
      const list = args!.split(',').map((a) => a.trim());
      for (const i of keyParams.get(fn!) ?? [])
        expect({
          fn,
          arg: list[i],
          ok: /^KEYS\[/.test(list[i]!) || bound.has(list[i]!) || underBase(list[i]!),
        }).toEqual({
          fn,
          arg: list[i],
          ok: true,
        });
    }
    for (const [, command, firstArg] of [...calls, ...tried]) {
      const key = firstArg!.trim();
      if (command === 'TIME') continue; // keyless
      const ok = /^KEYS\[[^\]]+\]$/.test(key) || bound.has(key) || underBase(key) || waitIndex(key);
      expect({ command, key, ok }).toEqual({ command, key, ok: true });
    }
  });
});
