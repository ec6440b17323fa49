import { readFileSync } from 'node:fs';
import { GENERATED, generatedModule } from '../../../scripts/gen-lua';
import * as lua from '../../../src/lua/scripts';
import { ENQUEUE_PROBE } from '../../../src/lua/generated';

/**
 * the enqueue probe ships as src/lua/enqueue-probe.lua, the one
 * source of the script; src/lua/generated.ts holds its text for the bundles
 * (`npm run lua` regenerates it).
 */
describe('C19: the shipped .lua files', () => {
  it('src/lua/generated.ts is what `npm run lua` makes of the .lua files (run it after editing one)', () => {
    expect(readFileSync(GENERATED, 'utf8')).toBe(generatedModule());
  });

  it('the engine runs the probe of the shipped file, byte for byte', () => {
    const text = readFileSync(require.resolve('../../../src/lua/enqueue-probe.lua'), 'utf8');
    expect(lua.PROBE).toBe(text);
    expect(ENQUEUE_PROBE).toBe(text);
  });

  it('the probe file documents its KEYS, ARGV and every reply', () => {
    const header = lua.PROBE.slice(0, lua.PROBE.indexOf(']]'));
    for (const part of ['KEYS[1]', 'KEYS[2]', 'KEYS[3]', 'ARGV[1]', '{1, pttl}', '{2}', '{3, jobId}', '{0}']) {
      expect(header).toContain(part);
    }
  });
});

describe("C19: the start-up probe tries every command the engine's scripts run", () => {
  it('each command a script calls (redis.call) is one the PERMISSIONS probe tries (INCR and ZRANGE were not)', () => {
    const called = new Set<string>();
    for (const [name, text] of Object.entries(lua)) {
      if (name === 'PERMISSIONS' || typeof text !== 'string') continue;
      for (const m of text.matchAll(/redis\.call\('([A-Z]+)'/g)) called.add(m[1]!);
    }
    const tried = new Set([...lua.PERMISSIONS.matchAll(/try\('([A-Z]+)'/g)].map((m) => m[1]!));
    // the scripts do call these (a change that stopped calling all of them would leave the test empty)
    expect([...called]).toEqual(expect.arrayContaining(['INCR', 'ZRANGE', 'MGET', 'HSET', 'TIME']));
    expect([...called].filter((c) => !tried.has(c))).toEqual([]);
  });
});
