import { redisClient } from '../../src/bullmq/adapter';

type P = Record<string, (...args: unknown[]) => P> & { exec(): Promise<unknown> };

/**
 * Stubs the replica WAIT pipeline of `queue`'s connection: the tests' Redis has no replica, so a
 * WAIT answers one replica; `fail()` makes the next `n` WAITs reject after they ran.
 */
export async function stubWait(queue: unknown) {
  const c = (await redisClient(queue as never)) as unknown as { pipeline(...a: unknown[]): P };
  const real = c.pipeline.bind(c);
  let failing = 0;
  let waits = 0;
  let failed = 0;
  c.pipeline = (...cmds: unknown[]) => {
    const p = (real as (...a: unknown[]) => P)(...cmds);
    const wait = p.wait!;
    let isWait = false;
    p.wait = (...args: unknown[]) => {
      isWait = true;
      return wait.apply(p, args);
    };
    const exec = p.exec.bind(p);
    p.exec = async () => {
      const out = (await exec()) as [Error | null, unknown][];
      if (isWait) {
        waits++;
        if (out[2]) out[2] = [null, 1];
        if (failing > 0) {
          failing--;
          failed++;
          throw new Error('Connection is closed.');
        }
      }
      return out;
    };
    return p;
  };
  return {
    fail(n = 1) {
      failing = n;
    },
    waits: () => waits,
    failed: () => failed,
    restore() {
      c.pipeline = real;
    },
  };
}
