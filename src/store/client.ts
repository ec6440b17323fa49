import { createHash } from 'node:crypto';
import * as lua from '../lua/scripts';
import { InvalidOptionsError, MissingPermissionError } from '../errors';
import type { StoreKeys } from './keys';
import { settlesWithin } from './within';

/**
 * The engine's Redis client: BullMQ's ioredis connection with the engine's
 * scripts defined on it as commands, and the start-up check that its Redis
 * user may run them.
 */

// ioredis commands defined below; the client is BullMQ's adapter around ioredis.
export type Client = Record<string, (...args: unknown[]) => Promise<unknown>> & {
  defineCommand(name: string, def: { numberOfKeys?: number; lua: string }): void;
  multi(): Multi;
  pipeline(): Multi;
  duplicate?(...args: unknown[]): Client;
  isCluster?: boolean;
  options?: Record<string, unknown>;
  disconnect?(): void;
  quit?(): Promise<unknown>;
};
/** How long a connection's QUIT may take before it is dropped (a Redis that accepts and never answers), ms. */
const QUIT_MS = 1000;

/**
 * Closes something gracefully (a connection's QUIT, a BullMQ Queue's close), or drops it when the
 * graceful close gets no answer in time (a Redis that accepts and never answers), then waits a
 * while more for the close to end (a dropped connection fails its QUIT at once).
 */
export async function closeOrDrop(close: () => Promise<unknown>, drop: () => unknown): Promise<void> {
  let closed = false;
  const closing = close().then(() => (closed = true));
  await settlesWithin(closing, QUIT_MS);
  if (closed) return;
  await Promise.resolve()
    .then(drop)
    .catch(() => undefined);
  await settlesWithin(closing, QUIT_MS);
}

/** Quits a connection the engine owns, or drops it when QUIT gets no answer in time. */
export async function quitOrDrop(c: { quit(): Promise<unknown>; disconnect(): void; status?: string }): Promise<void> {
  // (ended already: a disconnect now would only start ioredis' timer on a closed socket)
  if (c.status === 'end') return;
  // (a QUIT refused is dropped too)
  await closeOrDrop(
    () => c.quit(),
    () => c.disconnect(),
  );
}

export type Multi = Record<string, (...args: unknown[]) => Multi> & {
  exec(): Promise<[Error | null, unknown][] | null>;
};

const SCRIPTS = {
  sdBatch: { keys: 2, lua: lua.BATCH },
  sdDefer: { keys: 6, lua: lua.DEFER },
  sdExtend: { keys: 1, lua: lua.EXTEND },
  sdProbe: { keys: 3, lua: lua.PROBE },
  sdCancel: { keys: 4, lua: lua.CANCEL },
  sdFail: { keys: 3, lua: lua.FAIL },
  sdClear: { keys: 1, lua: lua.CLEAR },
  sdPermissions: { keys: 2, lua: lua.PERMISSIONS },
  sdWake: { keys: 3, lua: lua.WAKE },
  sdReplace: { keys: 1, lua: lua.REPLACE },
} as const;

/**
 * The command each script is defined as: its name and a digest of its source, so two copies of the
 * library of different versions sharing one ioredis client (an app and a module each with its own
 * copy) each run their own scripts, not whichever were defined last. Defining a name again defines
 * the same source.
 */
export const CMD = Object.fromEntries(
  Object.entries(SCRIPTS).map(([name, def]) => [
    name,
    `${name}_${createHash('sha1').update(def.lua).digest('hex').slice(0, 10)}`,
  ]),
) as Record<keyof typeof SCRIPTS, string>;

export function defineCommands(client: Client): Client {
  for (const [name, def] of Object.entries(SCRIPTS)) {
    const command = CMD[name as keyof typeof SCRIPTS];
    client.defineCommand(command, { numberOfKeys: def.keys, lua: def.lua });
  }
  return client;
}

/** `deniedCommand`'s answer for a refusal of the keys a command names, not of the command. */
const KEYS_DENIED = '~';

/**
 * The command a `NOPERM` error names, `KEYS_DENIED` for one that refuses the keys (Redis 7.0: 'no
 * permissions to access one of the keys used as arguments', later 'No permissions to access a
 * key'), or `null` for another error.
 */
function deniedCommand(error: unknown): string | null {
  // (a ReplyError reads 'ReplyError: NOPERM ...')
  const text = String(error);
  if (!text.includes('NOPERM')) return null;
  const command = /'([^']+)' command/.exec(text)?.[1];
  if (command) return command.toLowerCase();
  // Stryker disable next-line StringLiteral: unreachable: every NOPERM Redis answers a script's or a transaction's command names the command or a key (a channel's names no command the engine runs); the name only stands in for a message of a later Redis
  return /access (one of the keys|a key)/i.test(text) ? KEYS_DENIED : 'unknown';
}

/**
 * Checks, without leaving anything behind, that the client's Redis user may
 * run every command the engine uses: the scripts (EVALSHA, and EVAL when a
 * script is not cached yet), the commands inside them, MULTI/EXEC, SCRIPT LOAD
 * (`loadScripts`), and with `waitForReplicas` WAIT and CLIENT INFO; and that it
 * may write the queue's keys. Throws `MissingPermissionError`.
 */
export async function checkPermissions(c: Client, keys: StoreKeys, replicas: boolean): Promise<void> {
  const missing = new Set<string>();
  const attempt = async (run: () => Promise<unknown>) => {
    try {
      return await run();
    } catch (error) {
      const denied = deniedCommand(error);
      if (denied === null) throw error;
      missing.add(denied);
      return undefined;
    }
  };
  const probe = () => c[CMD.sdPermissions]!(`${keys.base}sd:probe`, keys.fence) as Promise<string[]>;
  // twice: the first call may load the script with EVAL, the second runs it with EVALSHA
  for (const run of [probe, probe]) {
    for (const name of ((await attempt(run)) as string[] | undefined) ?? []) {
      if (name === '!readonly') {
        throw new InvalidOptionsError(
          'The connection reaches a read-only replica (READONLY): the engine writes, give it the master',
        );
      }
      missing.add(name);
    }
  }
  await attempt(() => c.multi().exec());
  // (a transaction answered NOSCRIPT loads the scripts again: `loadScripts`; one already loaded
  // changes nothing)
  await attempt(() => loadScripts(c, keys.route, [lua.PERMISSIONS]));
  if (replicas) {
    await attempt(() => c.client!('INFO'));
    await attempt(() => c.wait!(0, 0));
  }
  // (every key the engine and BullMQ use is under the queue's base, the probe's too)
  const keysDenied = missing.delete(KEYS_DENIED);
  if (missing.size > 0 || keysDenied)
    throw new MissingPermissionError([...missing].sort(), keysDenied ? `${keys.base}*` : undefined);
}

/**
 * Loads every script the client defines (the engine's and BullMQ's), or the texts `only`, on the
 * queue's master: one pipeline, routed there by a keyed command that changes nothing (`route`, as
 * the `WAIT`'s).
 */
export async function loadScripts(c: Client, route: string, only?: readonly string[]): Promise<void> {
  const scripts =
    only ?? Object.values((c as { scriptsSet?: Record<string, { lua: string }> }).scriptsSet ?? {}).map((s) => s.lua);
  const p = c.pipeline().persist!(route);
  for (const lua of scripts) p.script!('LOAD', lua);
  // (only a transaction's EXEC answers null: one that WATCH discarded)
  for (const [err] of (await p.exec())!) if (err) throw err;
}
