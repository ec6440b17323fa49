import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flatten, GENERATED, generatedModule, INCLUDE, LUA_DIR, scriptFiles } from '../../../scripts/gen-lua';
import * as lua from '../../../src/lua/scripts';
import { ENQUEUE_PROBE } from '../../../src/lua/generated';
import { defineCommands, type Client } from '../../../src/store/client';

/**
 * Each script ships as src/lua/<name>.lua (the enqueue probe as enqueue-probe.lua), the one
 * source of the script, its shared helpers in src/lua/includes/ (`--- @include "<name>"`);
 * src/lua/generated.ts holds their flattened text for the bundles (`npm run lua` regenerates it).
 */
const read = (path: string) => readFileSync(join(LUA_DIR, path), 'utf8');
const includeFiles = readdirSync(join(LUA_DIR, 'includes')).sort();
/** The local functions a Lua text defines. */
const defined = (text: string) => [...text.matchAll(/local function (\w+)\(/g)].map((m) => m[1]!);
/** Whether a Lua text calls function `name` (outside its definition). */
const calls = (text: string, name: string) => new RegExp(`(?<!function )\\b${name}\\(`).test(text);
/** The commands the engine defines on its connection: what it runs. */
function engineScripts(): { numberOfKeys?: number; lua: string }[] {
  const defs: { numberOfKeys?: number; lua: string }[] = [];
  defineCommands({
    defineCommand: (_name: string, def: { numberOfKeys?: number; lua: string }) => defs.push(def),
  } as unknown as Client);
  return defs;
}

describe('C19: the shipped .lua files', () => {
  it('src/lua/generated.ts is what `npm run lua` makes of the .lua files (run it after editing one)', () => {
    expect(readFileSync(GENERATED, 'utf8')).toBe(generatedModule());
  });

  it('the engine runs the probe of the shipped file, byte for byte', () => {
    const text = readFileSync(require.resolve('../../../src/lua/enqueue-probe.lua'), 'utf8');
    expect(lua.PROBE).toBe(text);
    expect(ENQUEUE_PROBE).toBe(text);
  });

  it('every script file opens with a header documenting each KEYS[n] and ARGV[n] it reads and its replies', () => {
    expect(scriptFiles().length).toBeGreaterThanOrEqual(10);
    for (const file of scriptFiles()) {
      const text = read(file);
      expect([file, text.startsWith('--[[\n')]).toEqual([file, true]);
      const header = text.slice(0, text.indexOf(']]'));
      const body = flatten(file).slice(header.length);
      const used = [...new Set([...body.matchAll(/\b(KEYS|ARGV)\[\d+\]/g)].map((m) => m[0]))];
      expect([file, used.filter((k) => !header.includes(k))]).toEqual([file, []]);
      expect([file, /KEYS\[1\]/.test(header) && /ARGV/.test(header) && /Returns|Output/.test(header)]).toEqual([
        file,
        true,
      ]);
    }
  });

  it('every include is used: each file an `--- @include` names defines a function the including file calls, and every include is named', () => {
    const named = new Set<string>();
    for (const path of [...scriptFiles(), ...includeFiles.map((f) => `includes/${f}`)]) {
      const text = read(path);
      for (const [, name] of text.matchAll(INCLUDE)) {
        named.add(`${name}.lua`);
        const fns = defined(read(`includes/${name}.lua`));
        expect([path, name, fns.some((f) => calls(text, f))]).toEqual([path, name, true]);
      }
    }
    expect([...named].sort()).toEqual(includeFiles);
  });

  it('flattening puts each include in place once per script, and names the file of a missing one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sd-lua-'));
    try {
      mkdirSync(join(dir, 'includes'));
      writeFileSync(join(dir, 'includes', 'a.lua'), 'local function a() return 1 end\n');
      writeFileSync(join(dir, 'includes', 'b.lua'), '--- @include "a"\nlocal function b() return a() end\n');
      writeFileSync(join(dir, 's.lua'), '--- @include "a"\n--- @include "b"\nreturn b()\n');
      expect(flatten('s.lua', dir)).toBe(
        'local function a() return 1 end\nlocal function b() return a() end\nreturn b()\n',
      );
      writeFileSync(join(dir, 'includes', 'b.lua'), '--- @include "c"\n');
      expect(() => flatten('s.lua', dir)).toThrow(/includes\/b\.lua: no include "c"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the engine runs each script flattened, with as many keys as its header documents', () => {
    const flat = new Map(scriptFiles().map((f) => [flatten(f), f]));
    const defs = engineScripts();
    expect(defs.map((d) => flat.get(d.lua)).sort()).toEqual(scriptFiles());
    for (const d of defs) {
      const header = d.lua.slice(0, d.lua.indexOf(']]'));
      const keys = Math.max(...[...header.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1])));
      expect([flat.get(d.lua), d.numberOfKeys]).toEqual([flat.get(d.lua), keys]);
    }
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
