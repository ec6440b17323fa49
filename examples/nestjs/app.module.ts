import { Injectable, Module } from '@nestjs/common';
import type { DispatchEngine, StageRef } from '../../src';
import { InjectStageDeferral, StageDeferralModule } from '../../src/nestjs';
import { RenderExecutor, RenderModule } from './render';

/**
 * One place for the queue settings, as a ConfigService would hold them. With
 * `@nestjs/bullmq` you give `BullModule.forRootAsync({ inject: [QUEUE_CONFIG],
 * useFactory: (c: QueueConfig) => c })` the same connection and prefix, and the
 * dispatch queue is one more queue of your app (Bull Board shows it too).
 */
export const QUEUE_CONFIG = 'QUEUE_CONFIG';
export interface QueueConfig {
  connection: { host: string; port: number; password?: string };
  prefix: string;
}

@Module({
  providers: [
    {
      provide: QUEUE_CONFIG,
      useFactory: (): QueueConfig => {
        const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
        const password = url.password ? decodeURIComponent(url.password) : undefined;
        return {
          connection: { host: url.hostname, port: Number(url.port || 6379), ...(password ? { password } : {}) },
          prefix: 'myapp-nest',
        };
      },
    },
  ],
  exports: [QUEUE_CONFIG],
})
export class QueueConfigModule {}

/** A service of yours: asks for a stage to be rendered; a no-op while the stage is deferred. */
@Injectable()
export class ScenesService {
  constructor(@InjectStageDeferral() readonly engine: DispatchEngine<{ sceneUrl: string }>) {}

  render(ref: StageRef, sceneUrl: string) {
    return this.engine.enqueue(ref, { sceneUrl });
  }
}

@Module({
  imports: [
    QueueConfigModule,
    RenderModule,
    StageDeferralModule.forRootAsync({
      imports: [QueueConfigModule],
      inject: [QUEUE_CONFIG],
      useFactory: (config: QueueConfig) => ({
        ...config,
        queueName: 'stage-dispatch',
        executor: RenderExecutor, // a provider of RenderModule, resolved by the module
        worker: { concurrency: 4 },
        windows: { capacitySeconds: 1, jitter: 0 }, // short, for the example
      }),
    }),
  ],
  providers: [ScenesService],
})
export class AppModule {}
