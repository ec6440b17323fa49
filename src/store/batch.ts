import { CMD, type Client } from './client';
import type { StoreKeys } from './keys';

/** How many begin/release operations one batch script call handles. */
const MAX_BATCH = 256;

/** Hands an operation its reply, read if it asked so (a read that throws rejects that operation only). */
function settle(op: Op, reply: unknown): void {
  if (op.read === undefined) return op.resolve(reply);
  try {
    op.resolve(op.read(reply, op.args));
  } catch (error) {
    op.reject(error);
  }
}

/** An operation's arguments (see `BATCH`). */
export type OpArgs = (string | number)[];

interface Op {
  args: OpArgs;
  /** Reads the reply (a module function: nothing is allocated per operation for it). */
  read: ((reply: unknown, args: OpArgs) => unknown) | undefined;
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

/**
 * The hot path's batching: begin and release operations queued in one turn
 * of the event loop go to Redis as one `BATCH` script call, in order (at most
 * `MAX_BATCH` a call). Each reply ends with Redis' time, handed to `onClock`.
 */
export class Batcher {
  private queued: Op[] = [];
  private flushImmediate: NodeJS.Immediate | undefined;

  constructor(
    private readonly keys: StoreKeys,
    private readonly client: () => Promise<Client>,
    /** Redis' time in a reply, and this host's when its request was sent. */
    private readonly onClock: (redisMs: number, sentAt: number) => void,
  ) {}

  /**
   * Queues one operation (its arguments, see `BATCH`); resolves with its reply,
   * or with what `read` makes of it (read as the reply arrives: no promise of its own).
   */
  run<T = unknown>(args: OpArgs, read?: (reply: unknown, args: OpArgs) => T): Promise<T> {
    return new Promise((resolve, reject) => {
      this.queued.push({ args, read, resolve: resolve as (reply: unknown) => void, reject });
      // Stryker disable next-line ConditionalExpression: equivalent: a second flush of the turn finds nothing queued and sends nothing
      if (this.flushImmediate === undefined) this.flushImmediate = setImmediate(() => void this.send());
    });
  }

  private async send(): Promise<void> {
    const ops = this.queued;
    this.queued = [];
    this.flushImmediate = undefined;
    for (let i = 0; i < ops.length; i += MAX_BATCH) {
      const chunk = ops.slice(i, i + MAX_BATCH);
      const sentAt = Date.now();
      const args: (string | number)[] = [this.keys.index, this.keys.fence, this.keys.base, chunk.length];
      for (const op of chunk) for (const a of op.args) args.push(a);
      try {
        const c = await this.client();
        const replies = (await c[CMD.sdBatch]!(...args)) as unknown[];
        this.onClock(Number(replies[chunk.length]), sentAt);
        // Stryker disable next-line EqualityOperator: equivalent: settling past the end throws into the catch, which rejects operations already settled (no effect)
        for (let j = 0; j < chunk.length; j++) settle(chunk[j]!, replies[j]);
      } catch (error) {
        for (const op of chunk) op.reject(error);
      }
    }
  }
}
