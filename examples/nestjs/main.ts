/**
 * The NestJS integration (`bullmq-stage-deferral/nestjs`) on `@nestjs/bullmq`:
 * `BullModule.forRootAsync` holds the connection and prefix, the dispatch
 * queue is registered with `StageDeferralModule.registerQueue`, and a
 * `@Processor` class extending `StageDispatchHost` runs it. Run it with
 * `npx tsx examples/nestjs/main.ts` against a local Redis (REDIS_URL): the
 * stage finds no free slot, is deferred, and its wake-up dispatches it once a
 * slot frees; then the app closes and the process exits by itself.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule, ScenesService } from './app.module';
import { RenderFarm } from './render';

async function main() {
  // an application context (no HTTP server); an HTTP app is the same with NestFactory.create
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  const scenes = app.get(ScenesService);
  const { engine } = scenes;
  const deferred = new Promise<void>((resolve) => engine.once('deferred', () => resolve()));
  const dispatched = new Promise<void>((resolve) => engine.once('dispatched', () => resolve()));
  engine.on('deferred', (d) => console.log('deferred', d.reason, 'until', new Date(d.until).toISOString()));

  const ref = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };
  console.log('enqueue:', await scenes.render(ref, 's3://scenes/7'));
  // the @Processor's Worker runs the job: no free slot yet, so the stage is deferred
  await deferred;
  console.log('enqueue while deferred:', await scenes.render(ref, 's3://scenes/7'));
  console.log('delayed jobs on the queue:', await scenes.queue.getDelayedCount());

  app.get(RenderFarm).freeSlots = 1; // a slot frees; the wake-up dispatches the stage when its window ends
  await dispatched;
  console.log('dispatched', ref.scope.join('/'), ref.stage);

  // app.close(): the Worker stops taking jobs, running executors are aborted (their jobs go back,
  // delayed, no attempt spent), then the engine closes, then @nestjs/bullmq closes the queue
  await app.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
