import { performance } from 'node:perf_hooks';
import { dispatched, noCapacity, type DispatchEngine, type DispatchEngineOptions } from '../../src';
import { benchPrefix, client, dropPrefix } from '../lib/redis';
import { engine, refs } from '../lib/stages';
import { log, pool } from '../lib/stats';

/** How long one stage holds a slot of the farm, ms. */
const RENDER_MS = 50;
const SLOTS = 3;

export interface FairnessRun {
  /** Each small book: from the start until its last render ended, ms. */
  doneMs: number[];
  /** Each small book: renders the farm finished (all books) until its last one ended. */
  doneRenders: number[];
  /**
   * Each small book's time until done ÷ its fair share, the farm's own renders as the clock (so a
   * slower machine, whose wake-ups take longer, is not counted against the order): a book that gets
   * its share, one render in `books`, is done after books × its stages renders.
   */
  ratios: number[];
}

/**
 * Books of `big`, `small` and `small` stages wait on one resource of 3 slots (the big book's
 * first, in the line's oldest places); each render holds a slot RENDER_MS and the host wakes one
 * stage (`wakeDeferred({ resource, limit: 1 })`) when a slot frees. Each small book's time until
 * done is compared with its fair share (one render in three), counted in the farm's renders.
 */
export async function fairnessRun(
  lineOrder: NonNullable<DispatchEngineOptions['lineOrder']>,
  big: number,
  small: number,
): Promise<FairnessRun> {
  const redis = client();
  const prefix = benchPrefix(`resource-fair-${lineOrder}`);
  const books = { big: refs('big', big), s1: refs('s1', small), s2: refs('s2', small) };
  const left: Record<string, number> = { s1: small, s2: small };
  const doneAt: Record<string, number> = {};
  const doneAfter: Record<string, number> = {};
  let renders = 0;
  let busy = SLOTS; // the farm is full while the line forms
  let t0 = 0;
  let stopped = false;
  let allDone!: () => void;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  const free = () => {
    busy--;
    if (!stopped) void e.wakeDeferred({ resource: 'gpu', limit: 1 }).catch((err: unknown) => log(String(err)));
  };
  const e: DispatchEngine = engine(prefix, {
    resourceOf: () => 'gpu',
    lineOrder,
    windows: { capacitySeconds: 600, capacityMaxSeconds: 600, jitter: 0 },
    executor: async (ref) => {
      if (busy >= SLOTS) return noCapacity();
      busy++;
      const book = ref.scope[0]!;
      setTimeout(() => {
        renders++;
        if (book in left && --left[book]! === 0) {
          doneAt[book] = performance.now() - t0;
          doneAfter[book] = renders;
          if (Object.keys(doneAt).length === 2) allDone();
        }
        free();
      }, RENDER_MS);
      return dispatched(1, { capacityLeft: SLOTS - busy });
    },
  });
  try {
    await e.createWorker({ concurrency: 8 }).waitUntilReady();
    await pool([...books.big, ...books.s1, ...books.s2], 1, (ref) => e.enqueue(ref, {}));
    // every stage waits in the line (the first closed the gate, the others were gated)
    const line = e.queue.toKey('sd:wq:@gpu');
    const deadline = Date.now() + 120_000;
    while ((await redis.zcard(line)) < big + 2 * small) {
      if (Date.now() > deadline) throw new Error('the line did not form in 2 minutes');
      await new Promise((r) => setTimeout(r, 20));
    }
    t0 = performance.now();
    for (let i = 0; i < SLOTS; i++) free();
    const timeout = setTimeout(
      () => log(`resource fairness ${lineOrder}: small books not done in 10 minutes`),
      600_000,
    );
    await finished;
    clearTimeout(timeout);
    const doneRenders = [doneAfter.s1!, doneAfter.s2!];
    return { doneMs: [doneAt.s1!, doneAt.s2!], doneRenders, ratios: doneRenders.map((n) => n / (3 * small)) };
  } finally {
    stopped = true;
    await e.close();
    await dropPrefix(redis, prefix);
  }
}
