import {
  createDispatchEngine,
  stageId,
  type DispatchEngine,
  type DispatchEngineOptions,
  type StageRef,
} from '../../src';
import { readyJobId } from '../../src/job-data';
import { bullConnection } from './redis';
import { pool } from './stats';

export const NO_WORKER = { dispatched: false, jobs: 0, reason: 'no_worker_available' } as const;
export const SENT = { dispatched: true, jobs: 1, reason: null } as const;

/** A dispatch job of stage `book/s<i>:image` as a producer adds it (docs/producers.md): its id and deduplication id name the stage. */
export function dispatchJob(i: number, payload: unknown) {
  const sid = stageId({ scope: ['book', `s${i}`], stage: 'image' });
  return {
    name: 'image',
    data: { v: 1 as const, scope: ['book', `s${i}`], stage: 'image', payload },
    opts: { jobId: readyJobId(sid), deduplication: { id: sid }, attempts: 3, removeOnComplete: true },
  };
}

/** `count` stage refs `[scope, s<i>] / stage`, ids in a stable order. */
export function refs(scope: string, count: number, from = 0, stage = 'image'): StageRef[] {
  return Array.from({ length: count }, (_, i) => ({ scope: [scope, `s${from + i}`], stage }));
}

/** An engine on its own prefix whose executor always answers `no_worker_available` unless told otherwise. */
export function engine<P = unknown>(prefix: string, extra: Partial<DispatchEngineOptions<P>> = {}): DispatchEngine<P> {
  return createDispatchEngine<P, string>({
    connection: bullConnection(),
    prefix,
    queueName: 'q',
    executor: async () => NO_WORKER,
    windows: { capacitySeconds: 600 },
    ...extra,
  });
}

/** An engine whose executor always answers `no_worker_available`, and the number of calls it got. */
export function blockedEngine(prefix: string): { engine: DispatchEngine; calls: () => number } {
  let calls = 0;
  const e = engine(prefix, {
    executor: async () => {
      calls++;
      return NO_WORKER;
    },
  });
  return { engine: e, calls: () => calls };
}

/** Defers every ref through `dispatchStage` (its executor must answer a capacity reason). */
export async function deferAll<P>(
  e: DispatchEngine<P>,
  stages: readonly StageRef[],
  payload: P,
  concurrency = 64,
): Promise<void> {
  await pool(stages, concurrency, async (ref) => {
    const r = await e.dispatchStage(ref, payload);
    if (r.dispatched || r.deferred || r.until === undefined)
      throw new Error(`expected a new deferral, got ${JSON.stringify(r)}`);
  });
}
