import { performance } from 'node:perf_hooks';
import type { StageRef } from '../../src';

/** A seeded PRNG (mulberry32): the same workload in every run. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const stageKey = (ref: StageRef): string => `${ref.scope.join('/')}:${ref.stage}`;

export interface FarmFigures {
  /** Free slots integrated over the time at least one stage was not yet dispatched, ms (summed over slots). */
  idleWhileWaitingMs: number;
  /** The part of it before every slot was busy for the first time (the start of the run), ms. */
  idleAtStartMs: number;
  /** idleWhileWaitingMs ÷ (slots × drainMs). */
  idleShare: number;
  /** From the start of the run to the end of the last render, ms. */
  drainMs: number;
  /** From the start of the run to the last stage's dispatch, ms. */
  lastDispatchMs: number;
  /** Attempts that reached the farm (the executor's downstream), sent or not. */
  calls: number;
  /** Each slot freed while a stage waited stayed empty this long, ms (mean; refilled oldest first). */
  refillMeanMs: number;
  /** The same, 90th percentile. */
  refillP90Ms: number;
}

/**
 * A render farm of `slots` slots for a fixed set of stages, each rendering
 * for its own length. It integrates, on every state change (a stage sent, a
 * render done), the number of free slots while at least one stage has not
 * been sent yet: slot time lost while work waits. No timer samples it.
 */
export class SlotFarm {
  private busy = 0;
  private waiting: number;
  private done = 0;
  private readonly sent = new Set<string>();
  private t0 = 0;
  private last = 0;
  private idle = 0;
  private idleAtStart = -1;
  private lastDispatch = 0;
  private end = 0;
  private calls = 0;
  /** When slots freed (while stages waited) that have not been refilled yet, oldest first. */
  private readonly freedAt: number[] = [];
  private readonly gaps: number[] = [];
  private finished!: () => void;
  /** Resolves when every stage has rendered. */
  readonly drained: Promise<void>;

  constructor(
    readonly slots: number,
    private readonly lengths: ReadonlyMap<string, number>,
    /** Called after a render ends and its slot is free again. */
    private readonly onFree: () => void = () => undefined,
  ) {
    this.waiting = lengths.size;
    this.drained = new Promise((resolve) => (this.finished = resolve));
  }

  /** The run's clock starts: every stage exists and waits. */
  start(): void {
    this.t0 = performance.now();
    this.last = this.t0;
  }

  private mark(): number {
    const now = performance.now();
    if (this.waiting > 0) this.idle += (this.slots - this.busy) * (now - this.last);
    this.last = now;
    return now;
  }

  /** The downstream of an attempt: true when a slot was free and the stage is now rendering. */
  readonly offer = (ref: StageRef): boolean => {
    this.calls++;
    if (this.busy >= this.slots) return false;
    const k = stageKey(ref);
    const ms = this.lengths.get(k);
    if (ms === undefined) throw new Error(`unknown stage ${k}`);
    if (this.sent.has(k)) throw new Error(`stage ${k} sent twice`);
    this.lastDispatch = this.mark();
    const freed = this.freedAt.shift();
    if (freed !== undefined) this.gaps.push(this.lastDispatch - freed);
    this.sent.add(k);
    this.busy++;
    this.waiting--;
    if (this.idleAtStart < 0 && this.busy === this.slots) this.idleAtStart = this.idle;
    setTimeout(() => {
      this.end = this.mark();
      if (this.waiting > 0) this.freedAt.push(this.end);
      this.busy--;
      this.done++;
      if (this.done === this.lengths.size) this.finished();
      else this.onFree();
    }, ms);
    return true;
  };

  isSent(ref: StageRef): boolean {
    return this.sent.has(stageKey(ref));
  }

  figures(): FarmFigures {
    const drainMs = this.end - this.t0;
    return {
      idleWhileWaitingMs: this.idle,
      idleAtStartMs: Math.max(0, this.idleAtStart),
      idleShare: this.idle / (this.slots * drainMs),
      drainMs,
      lastDispatchMs: this.lastDispatch - this.t0,
      calls: this.calls,
      refillMeanMs: this.gaps.reduce((a, b) => a + b, 0) / Math.max(1, this.gaps.length),
      refillP90Ms: [...this.gaps].sort((a, b) => a - b)[Math.floor(0.9 * this.gaps.length)] ?? 0,
    };
  }
}
