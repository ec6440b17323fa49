import type { ExecutorResult, StageRef } from '../src';

/** A simulated render farm: a few slots, each render takes a while. */
export class RenderFarm {
  private busy = 0;
  executorCalls = 0;

  constructor(
    readonly slots: number,
    private readonly renderMs: (ref: StageRef) => number,
    private readonly onRendered: (ref: StageRef) => void,
  ) {}

  /**
   * The host's executor: sends the stage to a free slot (saying how many are left), or reports
   * that none is free.
   */
  readonly executor = async (ref: StageRef): Promise<ExecutorResult> => {
    this.executorCalls++;
    if (this.busy >= this.slots) return { dispatched: false, jobs: 0, reason: 'no_worker_available' };
    this.busy++;
    setTimeout(() => {
      this.busy--;
      this.onRendered(ref);
    }, this.renderMs(ref)).unref();
    return { dispatched: true, jobs: 1, reason: null, capacityLeft: this.slots - this.busy };
  };
}

/** Every stage of a small book: chapters x scenes x (image, video). */
export function book(id: string, chapters: number, scenes: number): StageRef[] {
  const refs: StageRef[] = [];
  for (let c = 1; c <= chapters; c++) {
    for (let s = 1; s <= scenes; s++) {
      for (const stage of ['image', 'video']) refs.push({ scope: [id, `ch-${c}`, `sc-${s}`], stage });
    }
  }
  return refs;
}

export const key = (ref: StageRef) => `${ref.scope.join('/')}:${ref.stage}`;
