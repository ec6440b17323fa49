import { Inject, Injectable, Module } from '@nestjs/common';
import type { DispatchContext, ExecutorResult, StageRef } from '../../src';
import type { StageExecutor } from '../../src/nestjs';

/** Your downstream: a render farm with a few slots (here, a counter). */
@Injectable()
export class RenderFarm {
  freeSlots = 0;

  async submit(ref: StageRef, sceneUrl: string): Promise<boolean> {
    if (this.freeSlots === 0) return false;
    this.freeSlots -= 1;
    console.log('rendering', ref.scope.join('/'), ref.stage, sceneUrl);
    return true;
  }
}

/** The executor as a provider: Nest injects its dependencies (explicit `@Inject`: no emitDecoratorMetadata needed). */
@Injectable()
export class RenderExecutor implements StageExecutor<{ sceneUrl: string }> {
  constructor(@Inject(RenderFarm) private readonly farm: RenderFarm) {}

  async execute(ref: StageRef, payload: { sceneUrl: string }, ctx: DispatchContext): Promise<ExecutorResult> {
    ctx.signal.throwIfAborted(); // the engine is closing: the job goes back, no attempt spent
    return (await this.farm.submit(ref, payload.sceneUrl))
      ? { dispatched: true, jobs: 1, reason: null }
      : { dispatched: false, jobs: 0, reason: 'no_worker_available' };
  }
}

@Module({ providers: [RenderFarm, RenderExecutor], exports: [RenderFarm] })
export class RenderModule {}
