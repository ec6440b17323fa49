import 'reflect-metadata';
import { BullModule, Processor } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { dispatched, InvalidOptionsError, noCapacity, type DispatchEngine, type StageRef } from '../../../src';
import { getStageDeferralToken, StageDeferralModule, StageDispatchHost } from '../../../src/nestjs';
import { closeNest, nestRoot, place, startNest } from '../../helpers/nest';
import { redisOptions, waitFor } from '../../helpers/redis';

/** How the dispatch queue is registered, and the set-ups refused at start. Real Redis. */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

afterEach(closeNest);

/**
 * A start that must fail: its error. Nest's `close()` after a failed `init()` throws that error
 * again and closes nothing, so the close hooks (the Workers, queues and engines) are called here.
 */
async function failedStart(imports: unknown[], providers: unknown[]): Promise<unknown> {
  const compiled = await Test.createTestingModule({ imports: imports as never[], providers: providers as never[] })
    .setLogger(false as never)
    .compile()
    .then(
      (app) => ({ app }),
      (error: unknown) => ({ error }),
    );
  if ('error' in compiled) return compiled.error;
  const { app } = compiled;
  const error = await app.init().then(
    () => undefined,
    (e: unknown) => e,
  );
  const hooks = app as unknown as { callDestroyHook(): Promise<void>; callShutdownHook(): Promise<void> };
  await hooks.callDestroyHook();
  await hooks.callShutdownHook();
  return error;
}

const calls: string[] = [];

@Processor('a')
class HostA extends StageDispatchHost {
  async execute() {
    calls.push('a');
    return dispatched();
  }
}

@Processor('b')
class HostB extends StageDispatchHost {
  async execute() {
    calls.push('b');
    return noCapacity();
  }
}

@Processor('a')
class SecondHostA extends StageDispatchHost {
  async execute() {
    return dispatched();
  }
}

describe('C26: registering the dispatch queue', () => {
  it('two dispatch queues in one app: each has its engine, each engine its host', async () => {
    calls.length = 0;
    const where = place();
    const app = await startNest(
      [
        nestRoot(where),
        StageDeferralModule.registerQueue({ name: 'a' }),
        StageDeferralModule.registerQueue({ name: 'b' }),
      ],
      [HostA, HostB],
    );
    const a = app.get<DispatchEngine>(getStageDeferralToken('a'));
    const b = app.get<DispatchEngine>(getStageDeferralToken('b'));
    expect([a.queue.name, b.queue.name]).toEqual(['a', 'b']);
    await b.enqueue(image, {});
    await waitFor(() => b.isStageDeferred(image), 'b deferred the stage');
    await a.enqueue(image, {});
    await waitFor(() => calls.includes('a'), 'a dispatched');
    expect(calls).toEqual(['b', 'a']);
  });

  it('registerQueueAsync: the engine options from a factory that injects a provider of an imported module; connection and prefix from BullModule.forRootAsync', async () => {
    const where = place();
    const CONFIG = 'CONFIG';
    @Module({ providers: [{ provide: CONFIG, useValue: { capacitySeconds: 42 } }], exports: [CONFIG] })
    class ConfigModule {}
    const app = await startNest(
      [
        BullModule.forRootAsync({
          imports: [ConfigModule],
          inject: [CONFIG],
          useFactory: () => ({ connection: redisOptions(), prefix: where.prefix }),
        }),
        StageDeferralModule.registerQueueAsync({
          name: 'a',
          imports: [ConfigModule],
          inject: [CONFIG],
          useFactory: (c: { capacitySeconds: number }) => ({
            windows: { capacitySeconds: c.capacitySeconds, jitter: 0 },
          }),
        }),
      ],
      [HostA],
    );
    const engine = app.get<DispatchEngine>(getStageDeferralToken('a'));
    expect(engine.queue.opts.prefix).toBe(where.prefix);
    await engine.enqueue(image, {});
  });
});

describe('C26: set-ups refused at start with InvalidOptionsError', () => {
  it('a misspelt engine option', async () => {
    const where = place();
    const error = await failedStart(
      [nestRoot(where), StageDeferralModule.registerQueue({ name: 'a', lockMS: 5 } as never)],
      [],
    );
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as Error).message).toMatch(/lockMs/);
  });

  it('a host on a queue registered with BullModule.registerQueue only: the error says to use StageDeferralModule.registerQueue', async () => {
    const where = place();
    const error = await failedStart([nestRoot(where), BullModule.registerQueue({ name: 'a' })], [HostA]);
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as Error).message).toMatch(
      /HostA runs queue a.*StageDeferralModule\.registerQueue\(\{ name: 'a' \}\)/,
    );
  });

  it('two hosts on one dispatch queue', async () => {
    const where = place();
    const error = await failedStart(
      [nestRoot(where), StageDeferralModule.registerQueue({ name: 'a' })],
      [HostA, SecondHostA],
    );
    expect(error).toBeInstanceOf(InvalidOptionsError);
    expect((error as Error).message).toMatch(/one StageDispatchHost on queue a/);
  });

  it('a queue name that is no string, before anything opens', () => {
    expect(() => StageDeferralModule.registerQueue({ name: '' })).toThrow(InvalidOptionsError);
    expect(() => StageDeferralModule.registerQueueAsync({ name: 'a' } as never)).toThrow(/useFactory/);
  });
});
