export { fetchBy } from './jobs';
import type { Harness } from './engine';
import { latch } from './jobs';

/** An executor answer that blocks until `release()`; `running` resolves once it was called. */
export function held<T>(answer: T) {
  const started = latch();
  const gate = latch();
  return {
    running: started.opened,
    release: () => gate.open(),
    answer: async () => {
      started.open();
      await gate.opened;
      return answer;
    },
  };
}

/** BullMQ's lock key of a job of the harness' queue. */
export const bullLock = (h: Harness, id: string) => `${h.prefix}:${h.queueName}:${id}:lock`;
