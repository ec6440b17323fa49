import 'reflect-metadata';
import { Test, type TestingModule } from '@nestjs/testing';
import { BullModule } from '@nestjs/bullmq';
import { Queue } from 'bullmq';
import { client, closeClients, connect, dropPrefix, isolated, redisOptions } from './redis';

/** What a NestJS test opened (its apps, the Queues it looked through) and its prefixes: `closeNest` ends them. */
const opened: TestingModule[] = [];
const queues: Queue[] = [];
const prefixes: string[] = [];

/** A prefix and queue name of the test's own; `closeNest` deletes the keys under the prefix. */
export function place() {
  const where = isolated();
  prefixes.push(where.prefix);
  return where;
}

/** A Queue of the test's own on the engine's queue, to look at jobs and workers from outside; closed by `closeNest`. */
export function look(where: { prefix: string; queueName: string }): Queue {
  const queue = new Queue(where.queueName, { connection: connect(), prefix: where.prefix });
  queues.push(queue);
  return queue;
}

/** Compiles and starts a testing module (Nest's logger off); closed by `closeNest`. */
export async function startNest(imports: unknown[], providers: unknown[] = []): Promise<TestingModule> {
  const app = await Test.createTestingModule({ imports: imports as never[], providers: providers as never[] })
    .setLogger(false as never)
    .compile();
  // a start that failed is not tracked: Nest's close() would throw its error again (C26's failedStart closes it)
  await app.init();
  opened.push(app);
  return app;
}

/** Apps whose start may fail: closed by their hooks (Nest's close() after a failed init throws its error again). */
const tried: TestingModule[] = [];

/** Compiles and starts a testing module: it, or the message of the start's error; closed by `closeNest`. */
export async function tryStartNest(
  imports: unknown[],
  providers: unknown[] = [],
): Promise<{ app: TestingModule } | { error: string }> {
  const app = await Test.createTestingModule({ imports: imports as never[], providers: providers as never[] })
    .setLogger(false as never)
    .compile();
  tried.push(app);
  return app.init().then(
    () => ({ app }),
    (error: Error) => ({ error: `${error.constructor.name}: ${error.message}` }),
  );
}

/** `app` was closed by the test itself: `closeNest` does not close it again. */
export function closedByTest(app: TestingModule): void {
  opened.splice(opened.indexOf(app), 1);
}

/** After each test: closes its apps, then its Queues, deletes its prefixes' keys and closes the clients. */
export async function closeNest(): Promise<void> {
  await Promise.all(opened.splice(0).map((app) => app.close()));
  for (const app of tried.splice(0)) {
    const hooks = app as unknown as { callDestroyHook(): Promise<void>; callShutdownHook(): Promise<void> };
    await hooks.callDestroyHook();
    await hooks.callShutdownHook();
  }
  await Promise.all(queues.splice(0).map((q) => q.close()));
  for (const prefix of prefixes.splice(0)) await dropPrefix(client(), prefix);
  await closeClients();
}

/** `BullModule.forRoot` with the test's Redis and prefix: what the app shares with the dispatch queue. */
export function nestRoot(where: { prefix: string }) {
  return BullModule.forRoot({ connection: redisOptions(), prefix: where.prefix });
}
