import type { Queue } from 'bullmq';
import type { Client } from './client';
import type { StoreKeys } from './keys';
import type { Transactions } from './transaction';

/** What the store's operations in `store/` (wake, clear, cancel, ...) use of a `DeferralStore`. */
export interface StoreParts {
  readonly queue: Queue;
  readonly keys: StoreKeys;
  /** MULTI transactions, confirmed on the replicas with `waitForReplicas`. */
  readonly tx: Transactions;
  /** The queue's client, with the engine's scripts defined on it (`DeferralStore.client`). */
  client(): Promise<Client>;
  /** The store's own `removeJobs` and `licencesIn` (what cancel and clear call, as the store's other operations do). */
  removeJobs(ids: readonly string[]): Promise<number>;
  licencesIn(prefix: string): Promise<string[]>;
}
