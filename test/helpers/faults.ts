import type { DispatchEngine } from '../../src';
import { ReplyError } from 'ioredis';
import { redisClient } from '../../src/bullmq/adapter';
import { CMD } from '../../src/store/client';

/**
 * Faults injected into a real engine's `BATCH` calls: the call still reaches
 * the real Redis (its reply is then lost), or is refused as Redis would.
 */

/** How a call fails: it ran and its reply is lost, or Redis refused it with an error reply. */
export type Fault = 'lost' | 'refused';

/** A command's function on ioredis' client. */
export type Send = (...args: unknown[]) => Promise<unknown>;

/**
 * Wraps the engine's `BATCH` command: a call `fault(args)` picks fails. `'lost'`: it runs,
 * its reply is lost (a timeout). `'refused'`: Redis refuses it with an error reply before it
 * runs (READONLY in a failover). `how` may also pick by the fault's number (1, 2, ...).
 */
export async function interceptBatch(
  h: { engine: DispatchEngine },
  fault: (args: unknown[]) => boolean,
  how: Fault | ((n: number) => Fault) = 'lost',
): Promise<{ faults: () => number }> {
  let faults = 0;
  await wrapBatch(h.engine, (send) => async (...args: unknown[]) => {
    if (!fault(args)) return send(...args);
    faults++;
    if ((typeof how === 'function' ? how(faults) : how) === 'refused')
      throw new ReplyError("READONLY You can't write against a read only replica.");
    await send(...args);
    throw new Error('Command timed out');
  });
  return { faults: () => faults };
}

/**
 * Puts `wrap(send)` in place of the engine's `BATCH` command (or script `cmd`) on its ioredis
 * client (`send` is the real one); returns what puts the real one back.
 */
export async function wrapBatch(
  engine: DispatchEngine,
  wrap: (send: Send) => Send,
  cmd: string = CMD.sdBatch,
): Promise<() => void> {
  await engine.waitUntilReady();
  const c = (await redisClient(engine.queue)) as unknown as Record<string, Send>;
  const real = c[cmd]!;
  c[cmd] = wrap(real.bind(c));
  return () => {
    c[cmd] = real;
  };
}

/** `fault` for the first `n` calls that carry a release ending the chain. */
export const first = (n: number) => {
  let seen = 0;
  return (args: unknown[]) => endsChain(args) && seen++ < n;
};

/** A call carrying a release that ends the chain (`'r', sid, own, token, mode, run`: mode '1', or 'e' for a stage that held nothing). */
export const endsChain = (args: unknown[]) => {
  const i = args.indexOf('r');
  return i > 0 && (args[i + 4] === '1' || args[i + 4] === 'e');
};
