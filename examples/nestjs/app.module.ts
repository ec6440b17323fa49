import { BullModule, InjectQueue } from '@nestjs/bullmq';
import { Injectable, Module } from '@nestjs/common';
import type { Queue } from 'bullmq';
import type { DispatchEngine, StageRef } from '../../src';
import { InjectStageDeferral, StageDeferralModule } from '../../src/nestjs';
import { RenderFarm, RenderProcessor } from './render';

/** A service of yours: asks for a stage to be rendered; a no-op while the stage is deferred. */
@Injectable()
export class ScenesService {
  constructor(
    @InjectStageDeferral('stage-dispatch') readonly engine: DispatchEngine<{ sceneUrl: string }>,
    @InjectQueue('stage-dispatch') readonly queue: Queue, // the same queue, as @nestjs/bullmq gives it
  ) {}

  render(ref: StageRef, sceneUrl: string) {
    return this.engine.enqueue(ref, { sceneUrl });
  }
}

@Module({
  imports: [
    // your app's BullMQ settings: the dispatch queue takes its connection and prefix from here
    BullModule.forRootAsync({
      useFactory: () => {
        const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
        const password = url.password ? decodeURIComponent(url.password) : undefined;
        return {
          connection: { host: url.hostname, port: Number(url.port || 6379), ...(password ? { password } : {}) },
          prefix: 'myapp-nest',
        };
      },
    }),
    // registers the queue with BullModule (@InjectQueue works) and its engine (@InjectStageDeferral)
    StageDeferralModule.registerQueue({
      name: 'stage-dispatch',
      windows: { capacitySeconds: 1, jitter: 0 }, // short, for the example
    }),
  ],
  providers: [RenderFarm, RenderProcessor, ScenesService],
})
export class AppModule {}
