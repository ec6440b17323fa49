/**
 * NestJS integration: `import { StageDeferralModule } from 'bullmq-stage-deferral/nestjs'`.
 *
 * This entry imports `@nestjs/common` and `@nestjs/core` (optional peers);
 * the main entry never imports it. It uses no decorator syntax itself (the
 * decorators are called as functions), so it needs no compiler flag.
 */
import {
  Inject,
  Logger,
  type DynamicModule,
  type InjectionToken,
  type ModuleMetadata,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  type OnModuleInit,
  type OptionalFactoryDependency,
  type Provider,
  type Type,
} from '@nestjs/common';
import { ModuleRef, ModulesContainer } from '@nestjs/core';
import type { WorkerOptions } from 'bullmq';
import {
  createDispatchEngine,
  InvalidOptionsError,
  type DispatchContext,
  type DispatchEngine,
  type DispatchEngineOptions,
  type Executor,
  type ExecutorResult,
  type StageRef,
} from './index';

/** Injection token of the engine (`@Inject(STAGE_DEFERRAL_ENGINE)`, or `@InjectStageDeferral()`). */
export const STAGE_DEFERRAL_ENGINE = 'STAGE_DEFERRAL_ENGINE';
/** Injection token of the options the module was given (after `useFactory` ran). */
export const STAGE_DEFERRAL_OPTIONS = 'STAGE_DEFERRAL_OPTIONS';
/** The module's own host of the engine and its Worker (internal). */
const STAGE_DEFERRAL_HOST = 'STAGE_DEFERRAL_HOST';

/** Injects the module's `DispatchEngine`: `constructor(@InjectStageDeferral() engine: DispatchEngine<P>)`. */
export function InjectStageDeferral(): ReturnType<typeof Inject> {
  return Inject(STAGE_DEFERRAL_ENGINE);
}

/** An executor as a NestJS provider: a class (with its own injected dependencies) implementing `execute`. */
export interface StageExecutor<P = unknown> {
  execute(ref: StageRef, payload: P, ctx: DispatchContext): Promise<ExecutorResult<string>>;
}

/** A class implementing `StageExecutor`, or the token of a provider that does. */
export type StageExecutorToken<P = unknown> = Type<StageExecutor<P>> | string | symbol;

/** The engine's options, where `executor` may be a provider, plus what the module does with a Worker. */
export interface StageDeferralModuleOptions<P = unknown> extends Omit<DispatchEngineOptions<P>, 'executor'> {
  /**
   * A function (as for `createDispatchEngine`), or a provider: a class
   * implementing `StageExecutor` or an injection token. A provider is looked
   * up in the whole application (`ModuleRef.get(token, { strict: false })`),
   * so list it in the `providers` of the module that holds its dependencies.
   * It must be a singleton (the default scope). Leave `executor` out for a
   * producer-only engine (no Worker).
   */
  executor?: Executor<P, string> | StageExecutorToken<P>;
  /**
   * The Worker the module runs on the dispatch queue once the application has
   * bootstrapped (`concurrency`, `limiter`, ...; the connection and prefix
   * are the engine's), closed on shutdown. `false`: no Worker (a producer, or
   * you run `engine.processor` yourself). Default: a Worker when there is an
   * executor, none without one.
   */
  worker?: false | Omit<WorkerOptions, 'connection' | 'prefix' | 'autorun'>;
}

/** `forRootAsync`: options from a factory, which may inject providers (a `ConfigService`). */
export interface StageDeferralModuleAsyncOptions<P = unknown> extends Pick<ModuleMetadata, 'imports'> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the factory's arguments are what `inject` names
  useFactory: (...args: any[]) => StageDeferralModuleOptions<P> | Promise<StageDeferralModuleOptions<P>>;
  inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Providers added to the module, e.g. an executor class whose dependencies come from `imports`. */
  extraProviders?: Provider[];
  /** Make the engine injectable in every module (default `true`, like `BullModule.forRoot`). */
  isGlobal?: boolean;
}

/**
 * The engine beside `@nestjs/bullmq`'s `BullModule`: give it the same
 * `connection` and `prefix` (from one `ConfigService` factory, say) and its
 * dispatch queue is one more BullMQ queue of your app.
 *
 * - provides the `DispatchEngine` (`@InjectStageDeferral()`);
 * - runs `engine.processor` in a Worker on the dispatch queue from
 *   `onApplicationBootstrap` (unless producer-only or `worker: false`);
 * - on shutdown (`onModuleDestroy`, the first kind of hook `app.close()` calls;
 *   a global module's after every other module's) closes
 *   the engine: no new attempt starts, running executors are aborted (their
 *   jobs go back to the queue, no attempt spent), the Worker closes, then the
 *   engine's queue and the connections it opened. A client you passed as
 *   `connection` stays open: it is yours.
 */
export class StageDeferralModule {
  static forRoot<P = unknown>(options: StageDeferralModuleOptions<P> & { isGlobal?: boolean }): DynamicModule {
    const { isGlobal = true, ...engineOptions } = options;
    return module(isGlobal, [{ provide: STAGE_DEFERRAL_OPTIONS, useValue: engineOptions }]);
  }

  static forRootAsync<P = unknown>(options: StageDeferralModuleAsyncOptions<P>): DynamicModule {
    if (typeof options?.useFactory !== 'function') {
      throw new InvalidOptionsError('Expected `StageDeferralModule.forRootAsync` to get `{ useFactory, inject? }`');
    }
    const { useFactory, inject = [], imports = [], extraProviders = [], isGlobal = true } = options;
    return {
      ...module(isGlobal, [{ provide: STAGE_DEFERRAL_OPTIONS, useFactory, inject }, ...extraProviders]),
      imports,
    };
  }
}

function module(isGlobal: boolean, providers: Provider[]): DynamicModule {
  return {
    module: StageDeferralModule,
    global: isGlobal,
    providers: [
      ...providers,
      {
        provide: STAGE_DEFERRAL_HOST,
        useFactory: (options: StageDeferralModuleOptions, moduleRef: ModuleRef, modules: ModulesContainer) => {
          if (isGlobal) checkOneGlobal(modules);
          return new StageDeferralHost(options, moduleRef);
        },
        inject: [STAGE_DEFERRAL_OPTIONS, ModuleRef, ModulesContainer],
      },
      {
        provide: STAGE_DEFERRAL_ENGINE,
        useFactory: (host: StageDeferralHost) => host.engine,
        inject: [STAGE_DEFERRAL_HOST],
      },
    ],
    exports: [STAGE_DEFERRAL_ENGINE, STAGE_DEFERRAL_OPTIONS],
  };
}

/**
 * Two global modules would both provide the engine's token everywhere, and
 * every `@InjectStageDeferral()` would get one of them, silently. Checked
 * before either engine opens a connection, so a refused start leaves nothing open.
 */
function checkOneGlobal(modules: ModulesContainer): void {
  const globals = [...modules.values()].filter((m) => m.metatype === StageDeferralModule && m.isGlobal);
  if (globals.length > 1) {
    throw new InvalidOptionsError(
      `Expected one global StageDeferralModule, got ${globals.length}: for an engine per queue, ` +
        'import each with `isGlobal: false` into the module that injects it',
    );
  }
}

/** Holds the engine and its Worker; NestJS calls its lifecycle hooks. */
class StageDeferralHost implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  readonly engine: DispatchEngine;
  private readonly workerOptions: Omit<WorkerOptions, 'connection' | 'prefix'> | undefined;
  private readonly resolveExecutor: (() => StageExecutor) | undefined;
  private readonly logger = new Logger('StageDeferralModule');

  constructor(options: StageDeferralModuleOptions, moduleRef: ModuleRef) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidOptionsError('Expected StageDeferralModule options to be an object');
    }
    const { executor, worker, ...engineOptions } = options;
    if (worker !== undefined && worker !== false && (typeof worker !== 'object' || worker === null)) {
      throw new InvalidOptionsError('Expected `worker` to be `false` or Worker options');
    }
    if (worker && executor === undefined) {
      throw new InvalidOptionsError(
        'Expected an `executor` with `worker` options: a producer-only engine runs no Worker (leave `worker` out)',
      );
    }
    const token = executorToken(executor);
    let resolved: StageExecutor | undefined;
    this.resolveExecutor = token === undefined ? undefined : () => (resolved ??= lookup(moduleRef, token));
    const fn: Executor<unknown, string> | undefined =
      token !== undefined
        ? (ref, payload, ctx) => this.resolveExecutor!().execute(ref, payload, ctx)
        : (executor as Executor<unknown, string> | undefined);
    this.engine = createDispatchEngine<unknown, string>({ ...engineOptions, ...(fn ? { executor: fn } : {}) });
    this.workerOptions = executor === undefined || worker === false ? undefined : { ...worker };
  }

  /**
   * Every provider exists now: a missing or wrong executor provider fails the
   * start, not the first dispatch (and the engine it would have served is closed).
   */
  async onModuleInit(): Promise<void> {
    try {
      this.resolveExecutor?.();
    } catch (error) {
      await this.engine.close();
      throw error;
    }
  }

  /** The Worker starts once the whole application is up (its executor's dependencies too). */
  onApplicationBootstrap(): void {
    if (!this.workerOptions) return;
    const worker = this.engine.createWorker(this.workerOptions);
    // a Worker with no `error` listener would throw a connection error as an uncaught exception
    worker.on('error', (error) => this.logger.error(`dispatch worker: ${error.message}`, error.stack));
  }

  /** `engine.close()` aborts running executors (their jobs go back, no attempt spent), then closes the Worker. */
  async onModuleDestroy(): Promise<void> {
    await this.engine.close();
  }
}

/** A provider's token, or undefined for a function executor (or none). */
function executorToken(executor: StageDeferralModuleOptions['executor']): StageExecutorToken | undefined {
  if (typeof executor === 'string' || typeof executor === 'symbol') return executor;
  if (typeof executor !== 'function') return undefined;
  // a class: `class` syntax, or a compiled one whose prototype has `execute`
  const proto = (executor as { prototype?: { execute?: unknown } }).prototype;
  if (/^class\b/.test(Function.prototype.toString.call(executor)) || typeof proto?.execute === 'function') {
    return executor as Type<StageExecutor>;
  }
  return undefined;
}

function lookup(moduleRef: ModuleRef, token: StageExecutorToken): StageExecutor {
  const name = typeof token === 'function' ? token.name : String(token);
  let instance: unknown;
  try {
    instance = moduleRef.get(token, { strict: false });
  } catch (error) {
    throw new InvalidOptionsError(
      `Expected the executor provider ${name} in the \`providers\` of a module of the application ` +
        `(a singleton): ${(error as Error).message}`,
    );
  }
  if (typeof (instance as Partial<StageExecutor> | undefined)?.execute !== 'function') {
    throw new InvalidOptionsError(
      `Expected the executor provider ${name} to have an \`execute(ref, payload, ctx)\` method`,
    );
  }
  return instance as StageExecutor;
}
