import { ReplicationUnconfirmedError } from '../errors';
import { loadScripts, type Client, type Multi } from './client';
import type { StoreKeys } from './keys';
import { withRedirects } from './redirects';
import { connectionOf, type ReplicaWait, type ReplicatedOp } from './replica-wait';

/**
 * The engine's MULTI transactions (deferrals, cancels, clears, failures):
 * each runs as one MULTI, followed across cluster redirections, and with
 * `waitForReplicas` confirmed on the replicas before it resolves.
 */
export class Transactions {
  constructor(
    private readonly client: () => Promise<Client>,
    private readonly keys: StoreKeys,
    private readonly replicas: () => ReplicaWait | undefined,
  ) {}

  /**
   * Runs `build`'s commands as one MULTI and returns EXEC's replies as
   * `[error, value]` pairs. With `waitForReplicas`, the MULTI also reads
   * `CLIENT INFO` (which connection ran the write), and the call returns once
   * the replicas hold the write. A MULTI refused for a cluster redirection
   * (nothing ran) is sent again once the slot map is refreshed.
   */
  async run(op: ReplicatedOp, build: (m: Multi) => unknown): Promise<[Error | null, unknown][]> {
    const c = await this.client();
    const replicas = this.replicas();
    const confirm = replicas?.active === true;
    let reloaded = false;
    const results = await withRedirects(c, async () => {
      for (;;) {
        const m = c.multi();
        await build(m);
        if (confirm) m.client!('INFO');
        const out = await m.exec();
        if (!out) throw new Error('The transaction was discarded');
        // ioredis sends a script as EVAL once per connection and EVALSHA after, even when that EVAL
        // never ran (a MULTI refused for a redirection, e.g. TRYAGAIN during a slot migration): the
        // node may not hold the script, and a MULTI reports NOSCRIPT without ioredis noticing, so
        // every later one on that connection would fail too. Load the scripts on the node and send
        // it again, once. Safe: the engine's own script refused, so it wrote nothing; a BullMQ add
        // that ran beside it is found again by its job id (the deferral recognises its own wake-up).
        if (!reloaded && out.some(([err]) => err !== null && /^NOSCRIPT/.test(err.message))) {
          reloaded = true;
          await loadScripts(c, this.keys.route);
          continue;
        }
        return out;
      }
    });
    if (confirm) {
      const [err, info] = results.pop()!;
      // a command of the write failed inside EXEC: that error is the caller's answer (it throws
      // it), and no write is claimed made (a failed WAIT said "written")
      if (results.some(([e]) => e !== null)) return results;
      // the write ran (its EXEC answered): whatever fails from here, its replication is unknown
      // (a clear reads nothing back then)
      if (err) throw new ReplicationUnconfirmedError(op, err);
      await replicas!.confirm(op, connectionOf(info));
    }
    return results;
  }

  /** A transaction of one command: its reply, or its error thrown. */
  async one(op: ReplicatedOp, build: (m: Multi) => unknown): Promise<unknown> {
    const [err, reply] = (await this.run(op, build))[0] ?? [new Error('The transaction had no reply')];
    if (err) throw err;
    return reply;
  }
}
