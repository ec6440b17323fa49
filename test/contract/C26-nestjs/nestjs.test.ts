import 'reflect-metadata';
import { Inject, Injectable, Module } from '@nestjs/common';
import {
  EngineClosedError,
  InvalidOptionsError,
  NoExecutorError,
  type DispatchContext,
  type DispatchEngine,
  type ExecutorResult,
  type StageRef,
} from '../../../src';
import {
  InjectStageDeferral,
  STAGE_DEFERRAL_ENGINE,
  StageDeferralModule,
  type StageDeferralModuleOptions,
  type StageExecutor,
} from '../../../src/nestjs';
import { notSent, SENT } from '../../helpers/engine';
import { latch } from '../../helpers/jobs';
import { closedByTest, closeNest, look, place, startNest } from '../../helpers/nest';
import { connect, redisOptions, waitFor } from '../../helpers/redis';

/** the NestJS module, with `@nestjs/testing` against the real Redis. */
const image: StageRef = { scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' };

/** The executor's own dependency: a pool of render slots the test opens and closes. */
@Injectable()
class RenderSlots {
  free = 0;
  readonly calls: { ref: StageRef; payload: unknown; ctx: DispatchContext }[] = [];
  /** Set by a test: the next call waits for it (and sees the signal it gets). */
  hold: ((ctx: DispatchContext) => Promise<ExecutorResult<string>>) | undefined;

  async take(ref: StageRef, payload: unknown, ctx: DispatchContext): Promise<ExecutorResult<string>> {
    this.calls.push({ ref, payload, ctx });
    if (this.hold) return this.hold(ctx);
    if (this.free === 0) return notSent('no_worker_available');
    this.free -= 1;
    return SENT;
  }
}

/** The executor as a provider: NestJS injects its dependency. */
@Injectable()
class RenderExecutor implements StageExecutor<{ url: string }> {
  constructor(@Inject(RenderSlots) readonly slots: RenderSlots) {}

  execute(ref: StageRef, payload: { url: string }, ctx: DispatchContext): Promise<ExecutorResult<string>> {
    return this.slots.take(ref, payload, ctx);
  }
}

@Module({ providers: [RenderSlots, RenderExecutor], exports: [RenderSlots] })
class RenderModule {}

/** A service of the app: the engine injected with `@InjectStageDeferral()`. */
@Injectable()
class ScenesService {
  constructor(@InjectStageDeferral() readonly engine: DispatchEngine<{ url: string }>) {}

  render(ref: StageRef) {
    return this.engine.enqueue(ref, { url: `s3://scenes/${ref.scope.join('/')}` });
  }
}

/** What `BullModule.forRootAsync` would be given too: one connection and prefix for both. */
const QUEUE_CONFIG = 'QUEUE_CONFIG';

afterEach(closeNest);

/** A testing module of the app, ScenesService provided unless `providers` says otherwise. */
const start = (imports: unknown[], providers: unknown[] = [ScenesService]) => startNest(imports, providers);

const fastWindows = { capacitySeconds: 1, jitter: 0 } satisfies StageDeferralModuleOptions['windows'];

describe('C26: StageDeferralModule', () => {
  it('a capacity outcome defers the stage (its wake-up delayed); the wake-up runs and dispatches', async () => {
    const where = place();
    const app = await start([
      RenderModule,
      StageDeferralModule.forRoot({
        connection: redisOptions(),
        ...where,
        executor: RenderExecutor,
        windows: fastWindows,
      }),
    ]);
    const scenes = app.get(ScenesService);
    const slots = app.get(RenderSlots);
    const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
    expect(scenes.engine).toBe(engine);

    expect(await scenes.render(image)).toMatchObject({ added: true });
    // the module's Worker ran the job: no slot, so the stage is deferred with a delayed wake-up
    await waitFor(() => slots.calls.length === 1, 'the first attempt');
    await waitFor(() => engine.isStageDeferred(image), 'the stage deferred');
    const [wakeUp] = await waitFor(async () => {
      const jobs = await engine.queue.getJobs(['delayed']);
      return jobs.length === 1 ? jobs : undefined;
    }, 'the delayed wake-up');
    expect(wakeUp!.id).toMatch(/@cap\.1\./);
    expect(wakeUp!.data).toMatchObject({ reason: 'no_worker_available', stage: 'image' });
    // while deferred, the producer's tick adds nothing
    expect(await scenes.render(image)).toMatchObject({ added: false, reason: 'deferred' });

    // a slot frees; the wake-up runs when its window ends and dispatches, once
    slots.free = 1;
    await waitFor(() => slots.calls.length === 2 && slots.free === 0, 'the wake-up dispatched', 15_000);
    await waitFor(async () => !(await engine.isStageDeferred(image)), 'the deferral ended');
    expect(slots.calls[1]!.payload).toEqual({ url: 's3://scenes/book-1/ch-2/sc-7' });
    expect(await engine.queue.getJobCounts('failed', 'delayed', 'wait')).toEqual({ failed: 0, delayed: 0, wait: 0 });
  });

  it('the executor provider gets its own injected dependency, and the engine is injectable anywhere', async () => {
    const where = place();
    const app = await start([
      RenderModule,
      StageDeferralModule.forRoot({ connection: redisOptions(), ...where, executor: RenderExecutor, worker: false }),
    ]);
    const executor = app.get(RenderExecutor);
    expect(executor.slots).toBe(app.get(RenderSlots));
    executor.slots.free = 1;
    const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
    expect(await engine.dispatchStage(image, { url: 'u' })).toMatchObject({ dispatched: true });
    expect(executor.slots.calls).toHaveLength(1);
    expect(executor.slots.calls[0]!.ctx.fencingToken).toBeGreaterThan(0);
    // worker: false: no Worker on the queue
    expect(await look(where).getWorkers()).toEqual([]);
  });

  it('forRootAsync with imports and inject: options (connection, prefix) from a config provider, a function executor calling an injected service', async () => {
    const where = place();
    const connection = connect();
    @Module({
      providers: [{ provide: QUEUE_CONFIG, useValue: { connection, prefix: where.prefix } }],
      exports: [QUEUE_CONFIG],
    })
    class QueueConfigModule {}
    const app = await start([
      RenderModule,
      StageDeferralModule.forRootAsync({
        imports: [QueueConfigModule, RenderModule],
        inject: [QUEUE_CONFIG, RenderSlots],
        useFactory: async (config: { connection: typeof connection; prefix: string }, slots: RenderSlots) => ({
          ...config,
          queueName: where.queueName,
          windows: fastWindows,
          executor: (ref: StageRef, payload: unknown, ctx: DispatchContext) => slots.take(ref, payload, ctx),
        }),
      }),
    ]);
    const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
    expect(engine.queue.opts.prefix).toBe(where.prefix);
    expect(engine.queue.name).toBe(where.queueName);
    const slots = app.get(RenderSlots);
    slots.free = 1;
    await app.get(ScenesService).render(image);
    await waitFor(() => slots.free === 0, 'dispatched by the module Worker through the injected service');
    expect(slots.calls).toHaveLength(1);
    // the Worker is on the queue, under the same prefix
    await waitFor(async () => (await look(where).getWorkers()).length === 1, 'one Worker on the queue');
    await app.close();
    closedByTest(app);
    // the engine never closes a client it was given
    expect(connection.status).toBe('ready');
  });

  it('forRootAsync extraProviders: an executor class of the module itself, its dependency from `imports`', async () => {
    const where = place();
    @Injectable()
    class LocalExecutor implements StageExecutor {
      constructor(@Inject(RenderSlots) readonly slots: RenderSlots) {}
      execute(ref: StageRef, payload: unknown, ctx: DispatchContext) {
        return this.slots.take(ref, payload, ctx);
      }
    }
    const app = await start(
      [
        StageDeferralModule.forRootAsync({
          imports: [RenderModule],
          extraProviders: [LocalExecutor],
          useFactory: () => ({ connection: redisOptions(), ...where, executor: LocalExecutor, worker: false }),
        }),
      ],
      [],
    );
    const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
    expect(await engine.dispatchStage(image, {})).toMatchObject({ dispatched: false, reason: 'no_worker_available' });
    expect(await engine.isStageDeferred(image)).toBe(true);
    expect(app.get(RenderSlots, { strict: false }).calls).toHaveLength(1);
  });

  it('app.close() aborts the running executor, closes the Worker and the engine; the job goes back, no attempt spent', async () => {
    const where = place();
    const started = latch<DispatchContext>();
    const options = { connection: redisOptions(), ...where, executor: RenderExecutor, retry: { attempts: 1 } };
    const app = await start([RenderModule, StageDeferralModule.forRoot(options)]);
    const slots = app.get(RenderSlots);
    slots.hold = (ctx) =>
      new Promise((_, reject) => {
        started.open(ctx);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
      });
    const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
    await app.get(ScenesService).render(image);
    const ctx = await started.opened;
    const queue = look(where);
    await waitFor(async () => (await queue.getWorkers()).length === 1, 'the module Worker is up');

    await app.close();
    closedByTest(app);
    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBeInstanceOf(EngineClosedError);
    // the engine is closed and its Worker is gone from the queue
    await expect(engine.enqueue(image, { url: 'u' })).rejects.toBeInstanceOf(EngineClosedError);
    await waitFor(async () => (await queue.getWorkers()).length === 0, 'no Worker left on the queue');
    // nothing lost: the job waits for the next worker, its one attempt unspent
    const [job] = await queue.getJobs(['delayed', 'wait'], 0, -1);
    expect(job).toBeDefined();
    expect(job!.attemptsMade).toBe(0);
    expect(await queue.getJobCounts('failed', 'active')).toEqual({ failed: 0, active: 0 });

    // the next app on the queue runs it
    const next = await start([RenderModule, StageDeferralModule.forRoot(options)]);
    next.get(RenderSlots).free = 1;
    await waitFor(() => next.get(RenderSlots).free === 0, 'the next app dispatched the job', 15_000);
    expect(await queue.getJobCounts('failed')).toEqual({ failed: 0 });
  });

  it('producer-only: no executor, no Worker; enqueue adds the job, dispatchStage is a clear NoExecutorError', async () => {
    const where = place();
    const app = await start([StageDeferralModule.forRoot({ connection: redisOptions(), ...where })]);
    const engine = app.get<DispatchEngine>(STAGE_DEFERRAL_ENGINE);
    expect(await app.get(ScenesService).render(image)).toMatchObject({ added: true });
    await expect(engine.dispatchStage(image, {})).rejects.toBeInstanceOf(NoExecutorError);
    const queue = look(where);
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
    expect(await queue.getWorkers()).toEqual([]);
  });

  it('a wrong setup fails the start with InvalidOptionsError: executor not provided, worker without executor, misspelt option', async () => {
    const where = place();
    const base = { connection: redisOptions(), ...where };
    // RenderExecutor is provided by no module
    await expect(start([StageDeferralModule.forRoot({ ...base, executor: RenderExecutor })], [])).rejects.toThrow(
      /executor provider RenderExecutor in the `providers` of a module/,
    );
    await expect(start([StageDeferralModule.forRoot({ ...base, worker: { concurrency: 2 } })], [])).rejects.toThrow(
      InvalidOptionsError,
    );
    await expect(
      start([StageDeferralModule.forRoot({ ...base, lockMS: 1000 } as StageDeferralModuleOptions)], []),
    ).rejects.toThrow(/did you mean `lockMs`/);
    expect(() => StageDeferralModule.forRootAsync({} as never)).toThrow(InvalidOptionsError);
  });
});
