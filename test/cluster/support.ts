import { randomUUID } from 'node:crypto';
import type { ExecutorResult } from '../../src';
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

export { SENT } from '../helpers/engine';
export const NO_WORKER: ExecutorResult<string> = { dispatched: false, jobs: 0, reason: 'no_worker_available' };
