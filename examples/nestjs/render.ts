import { OnWorkerEvent, Processor } from '@nestjs/bullmq';
import { Inject, Injectable } from '@nestjs/common';
import type { Job } from 'bullmq';
import { dispatched, noCapacity, type DispatchContext, type DispatchResult, type StageRef } from '../../src';
import { StageDispatchHost } from '../../src/nestjs';

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

/**
 * The dispatch queue's processor: `@nestjs/bullmq` makes its Worker (options
 * as for any `@Processor`), `StageDispatchHost` routes each job through the
 * engine to `execute`. Its dependencies are injected as usual (explicit
 * `@Inject`: no emitDecoratorMetadata needed).
 */
@Processor('stage-dispatch', { concurrency: 4 })
export class RenderProcessor extends StageDispatchHost<{ sceneUrl: string }> {
  constructor(@Inject(RenderFarm) private readonly farm: RenderFarm) {
    super();
  }

  async execute(ref: StageRef, payload: { sceneUrl: string }, ctx: DispatchContext) {
    ctx.signal.throwIfAborted(); // the app is closing: the job goes back, no attempt spent
    return (await this.farm.submit(ref, payload.sceneUrl)) ? dispatched() : noCapacity();
  }

  @OnWorkerEvent('completed')
  onCompleted(job: Job, result: DispatchResult) {
    console.log('job', job.id, result.dispatched ? 'dispatched' : `completed (${result.reason})`);
  }
}
