import { randomUUID } from 'node:crypto';
import type { ExecutorResult, StageRef } from '../../src';
import { redisServerAvailable } from './harness';

/** `describe` when redis-server is installed, else `describe.skip` with a message saying why. */
export function describeWithRedisServer(name: string, fn: () => void): void {
  if (redisServerAvailable()) {
    describe(name, fn);
    return;
  }

  console.warn(`Skipping "${name}": redis-server / redis-cli are not installed (apt-get install redis-server).`);
  describe.skip(name, fn);
}

/** A hash-tagged prefix and a queue name no other test uses. */
export function taggedIsolated(tag = randomUUID().slice(0, 8)): { prefix: string; queueName: string } {
  return { prefix: `{t-${tag}}`, queueName: `q-${randomUUID().slice(0, 8)}` };
}

export const SENT: ExecutorResult = { dispatched: true, jobs: 1, reason: null };
export const NO_WORKER: ExecutorResult = { dispatched: false, jobs: 0, reason: 'no_worker_available' };

/**
 * An executor whose answers are scripted per stage: `plan(key)` returns the
 * answers in order; after the last one it keeps answering SENT. Every call is
 * recorded with its time.
 */
export function scriptedExecutor(plan: (key: string) => ExecutorResult[] = () => []) {
  const calls: { key: string; at: number; result: ExecutorResult }[] = [];
  const seen = new Map<string, number>();
  const executor = async (ref: StageRef): Promise<ExecutorResult> => {
    const key = keyOf(ref);
    const n = seen.get(key) ?? 0;
    seen.set(key, n + 1);
    const result = plan(key)[n] ?? SENT;
    calls.push({ key, at: Date.now(), result });
    return result;
  };
  const callsOf = (ref: StageRef) => calls.filter((c) => c.key === keyOf(ref));
  return { executor, calls, callsOf };
}

export function keyOf(ref: StageRef): string {
  return `${ref.scope.join('/')}/${ref.stage}`;
}
