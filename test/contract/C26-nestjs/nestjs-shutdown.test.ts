import 'reflect-metadata';
import { Inject, Injectable, Module, Scope, type DynamicModule, type OnModuleDestroy } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  InvalidOptionsError,
  type DispatchContext,
  type DispatchEngine,
  type ExecutorResult,
  type StageRef,
} from '../../../src';
import {
  InjectStageDeferral,
  STAGE_DEFERRAL_ENGINE,
  StageDeferralModule,
  type StageExecutor,
} from '../../../src/nestjs';
import { SENT } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { closedByTest, closeNest, look, place, startNest } from '../../helpers/nest';
import { redisOptions, waitFor } from '../../helpers/redis';

/** Check of as a NestJS user would use it. Real Redis. */
const image: StageRef = { scope: ['book-1'], stage: 'image' };

afterEach(closeNest);

/** A downstream client closed by its own module's `onModuleDestroy` (a pool, an HTTP agent, Prisma's `$disconnect`). */
@Injectable()
class Downstream implements OnModuleDestroy {
  closed = false;
  private pending: ((e: Error) => void)[] = [];
  readonly started = latch<DispatchContext>();

  send(ctx: DispatchContext): Promise<ExecutorResult<string>> {
    if (this.closed) return Promise.reject(new Error('downstream pool is closed'));
    this.started.open(ctx);
    return new Promise((_, reject) => {
      this.pending.push(reject);
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
    });
  }

  onModuleDestroy() {
    this.closed = true;
    for (const reject of this.pending.splice(0)) reject(new Error('downstream pool is closed'));
  }
}

@Injectable()
class DownstreamExecutor implements StageExecutor {
  constructor(@Inject(Downstream) readonly downstream: Downstream) {}
  execute(_ref: StageRef, _payload: unknown, ctx: DispatchContext) {
    return this.downstream.send(ctx);
  }
}

@Module({ providers: [Downstream, DownstreamExecutor], exports: [Downstream] })
class DownstreamModule {}

describe('C26: shutdown order', () => {
  // KNOWN LIMITATION, not fixed (README "NestJS", docs/ecosystem.md): Nest destroys a global module
  // after every other one, so a resource the executor uses that closes in its own module's
  // onModuleDestroy is gone while the Worker still runs; close such resources in
  // onApplicationShutdown, or import the module with isGlobal: false. `it.failing` passes while the
  // limitation stands and fails the day it is fixed (then make it a plain `it`).
  it.failing(
    'app.close() aborts a running executor before its own dependencies are destroyed (global module): the job goes back, no attempt spent',
    async () => {
      const where = place();
      const app = await startNest([
        DownstreamModule,
        StageDeferralModule.forRoot({
          connection: redisOptions(),
          ...where,
          executor: DownstreamExecutor,
          retry: { attempts: 1 },
        }),
      ]);
      const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
      await engine.enqueue(image, {});
      const ctx = await app.get(Downstream).started.opened;
      const queue = look(where);

      await app.close();
      closedByTest(app);
      // nothing lost: the job waits for the next worker, its one attempt unspent
      expect(await queue.getJobCounts('failed')).toEqual({ failed: 0 });
      const [job] = await queue.getJobs(['delayed', 'wait'], 0, -1);
      expect(job?.attemptsMade).toBe(0);
      // the engine closed first: the executor saw its signal, not its pool closing under it
      expect(ctx.signal.aborted).toBe(true);
    },
  );
});

describe('C26: more than one StageDeferralModule', () => {
  it('two global StageDeferralModules (two queues) in one app: the start fails clearly, no engine is picked silently', async () => {
    const a = place();
    const b = place();
    const build = Test.createTestingModule({
      imports: [
        StageDeferralModule.forRoot({ connection: redisOptions(), ...a }),
        StageDeferralModule.forRoot({ connection: redisOptions(), ...b }),
      ],
    }).setLogger(false as never);
    let app: TestingModule | undefined;
    const started = build.compile().then(async (m) => {
      app = m;
      await m.init();
      return m;
    });
    try {
      await expect(started).rejects.toThrow(InvalidOptionsError);
    } finally {
      if (app) await app.close().catch(() => undefined);
    }
  });

  type Where = { prefix: string; queueName: string };
  /** One queue per feature module: each module imports its own StageDeferralModule and injects its engine. */
  function features(deferral: (where: Where) => DynamicModule) {
    const a = place();
    const b = place();
    @Injectable()
    class ServiceA {
      constructor(@InjectStageDeferral() readonly engine: DispatchEngine) {}
    }
    @Injectable()
    class ServiceB {
      constructor(@InjectStageDeferral() readonly engine: DispatchEngine) {}
    }
    @Module({ imports: [deferral(a)], providers: [ServiceA] })
    class FeatureA {}
    @Module({ imports: [deferral(b)], providers: [ServiceB] })
    class FeatureB {}
    const check = (app: { get<T>(t: new (...args: never[]) => T): T }) => {
      expect(app.get(ServiceA).engine.queue.name).toBe(a.queueName);
      expect(app.get(ServiceB).engine.queue.name).toBe(b.queueName);
    };
    return { imports: [FeatureA, FeatureB], check };
  }
  // a shared helper, as an app with one queue per bounded context would write it
  const helper = (where: Where) =>
    StageDeferralModule.forRootAsync({ isGlobal: false, useFactory: () => ({ connection: redisOptions(), ...where }) });

  it('isGlobal false, two feature modules from one helper (forRootAsync): each gets its own engine on its own queue', async () => {
    const { imports, check } = features(helper);
    check(await startNest(imports));
  });

  it('the same helper under NestFactory (deep-hashed module ids): two forRootAsync calls stay two engines', async () => {
    const { imports, check } = features(helper);
    @Module({ imports })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      check(app);
    } finally {
      await app.close();
    }
  });

  it('isGlobal false, two feature modules with forRoot: each gets its own engine on its own queue', async () => {
    const { imports, check } = features((where) =>
      StageDeferralModule.forRoot({ connection: redisOptions(), ...where, isGlobal: false }),
    );
    check(await startNest(imports));
  });
});

describe('C26: executor providers', () => {
  it.each([
    ['request', Scope.REQUEST],
    ['transient', Scope.TRANSIENT],
  ])('a %s-scoped executor provider fails the start with InvalidOptionsError', async (_name, scope) => {
    const where = place();
    @Injectable({ scope })
    class ScopedExecutor implements StageExecutor {
      async execute() {
        return SENT;
      }
    }
    await expect(
      startNest(
        [StageDeferralModule.forRoot({ connection: redisOptions(), ...where, executor: ScopedExecutor })],
        [ScopedExecutor],
      ),
    ).rejects.toThrow(/singleton/);
  });

  it('an executor provider whose execute throws synchronously: the job fails with that error (an attempt), the app goes on', async () => {
    const where = place();
    let calls = 0;
    @Injectable()
    class SyncThrow implements StageExecutor {
      execute(): Promise<ExecutorResult<string>> {
        calls += 1;
        if (calls === 1) throw new Error('sync boom');
        return Promise.resolve(SENT);
      }
    }
    const app = await startNest(
      [
        StageDeferralModule.forRoot({
          connection: redisOptions(),
          ...where,
          executor: SyncThrow,
          retry: { attempts: 1 },
        }),
      ],
      [SyncThrow],
    );
    const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
    await expect(engine.dispatchStage(image, {})).rejects.toThrow('sync boom');
    expect(await engine.dispatchStage(image, {})).toMatchObject({ dispatched: true });
  });
});

describe('C26: app.close()', () => {
  it('app.close() twice resolves both times; the engine is closed once', async () => {
    const where = place();
    const app = await startNest([
      StageDeferralModule.forRoot({ connection: redisOptions(), ...where, executor: async () => SENT }),
    ]);
    const queue = look(where);
    await waitFor(async () => (await queue.getWorkers()).length === 1, 'the module Worker is up');
    await Promise.all([app.close(), app.close()]);
    await app.close();
    closedByTest(app);
    await waitFor(async () => (await queue.getWorkers()).length === 0, 'no Worker left');
  });
});
