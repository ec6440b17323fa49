/**
 * NestJS on `@nestjs/bullmq`: `import { StageDeferralModule, StageDispatchHost } from 'bullmq-stage-deferral/nestjs'`.
 *
 * `StageDeferralModule.registerQueue({ name })` registers the dispatch queue with
 * `BullModule` (its connection and prefix from `BullModule.forRoot`) and an engine
 * on that queue's own Redis client. Your `@Processor(name)` class extends
 * `StageDispatchHost`: `@nestjs/bullmq` makes its Worker, and its `process` runs the
 * engine's processor, which calls the class's `execute`.
 *
 * This entry imports `@nestjs/bullmq`, `@nestjs/common` and `@nestjs/core` (optional
 * peers); the main entry never imports it. It uses no decorator syntax itself (the
 * decorators are called as functions), so it needs no compiler flag.
 */
import { BullModule, getQueueToken, WorkerHost } from '@nestjs/bullmq';
import {
  Inject,
  type DynamicModule,
  type InjectionToken,
  type ModuleMetadata,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  type OptionalFactoryDependency,
  type Provider,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { Job, Queue, RedisClient, Worker } from 'bullmq';
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  createDispatchEngine,
  InvalidOptionsError,
  type DispatchContext,
  type DispatchEngine,
  type DispatchEngineOptions,
  type DispatchResult,
  type ExecutorResult,
  type StageRef,
} from './index';

/** The engine's options, but connection, prefix and queue name: `BullModule`'s. */
export type StageDeferralEngineOptions<P = unknown> = Omit<
  DispatchEngineOptions<P>,
  'connection' | 'prefix' | 'queueName' | 'executor'
>;

/** The dispatch queue: its name, and the `BullModule.forRoot` configuration it uses. */
export interface StageDeferralQueue {
  /** The queue's name, as `@Processor(name)` and `@InjectQueue(name)` give it. Default `'stage-dispatch'`. */
  name?: string;
  /** The `configKey` of the `BullModule.forRoot(configKey, …)` whose connection and prefix it uses. Default: the unnamed one. */
  configKey?: string;
}

/** `registerQueue`: the queue, and the engine's options. */
export type StageDeferralModuleOptions<P = unknown> = StageDeferralQueue & StageDeferralEngineOptions<P>;

/** `registerQueueAsync`: the queue, and the engine's options from a factory that may inject providers. */
export interface StageDeferralModuleAsyncOptions<P = unknown>
  extends StageDeferralQueue, Pick<ModuleMetadata, 'imports'> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the factory's arguments are what `inject` names
  useFactory: (...args: any[]) => StageDeferralEngineOptions<P> | Promise<StageDeferralEngineOptions<P>>;
  inject?: (InjectionToken | OptionalFactoryDependency)[];
}

const DEFAULT_QUEUE = 'stage-dispatch';

/** The injection token of the engine of queue `name`. */
export function getStageDeferralToken(name = DEFAULT_QUEUE): string {
  return `StageDeferralEngine_${name}`;
}

/** Injects the engine of queue `name`: `constructor(@InjectStageDeferral() engine: DispatchEngine<P>)`. */
export function InjectStageDeferral(name = DEFAULT_QUEUE): ReturnType<typeof Inject> {
  return Inject(getStageDeferralToken(name));
}

const bindingToken = (name: string) => `StageDeferralBinding_${name}`;
const optionsToken = (name: string) => `StageDeferralOptions_${name}`;

export class StageDeferralModule {
  /**
   * Registers the dispatch queue with `BullModule` (do not register it there
   * too) and provides its engine (`@InjectStageDeferral(name)`). The queue
   * (`@InjectQueue(name)`) and the engine are exported to the importing module.
   */
  static registerQueue<P = unknown>(options: StageDeferralModuleOptions<P> = {}): DynamicModule {
    const { name, configKey, ...engineOptions } = queueOf(options, 'registerQueue');
    return module(name, configKey, [], { provide: optionsToken(name), useValue: engineOptions });
  }

  /** As `registerQueue`, with the engine's options from `useFactory` (which may `inject` a `ConfigService`). */
  static registerQueueAsync<P = unknown>(options: StageDeferralModuleAsyncOptions<P>): DynamicModule {
    const { name, configKey, imports = [], useFactory, inject = [] } = queueOf(options, 'registerQueueAsync');
    if (typeof useFactory !== 'function') {
      throw new InvalidOptionsError(
        'Expected `StageDeferralModule.registerQueueAsync` to get `{ useFactory, inject? }`',
      );
    }
    return module(name, configKey, imports, { provide: optionsToken(name), useFactory, inject });
  }
}

function queueOf<O extends StageDeferralQueue>(options: O, method: string) {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError(`Expected \`StageDeferralModule.${method}\` to get an options object`);
  }
  const { name = DEFAULT_QUEUE } = options;
  if (typeof name !== 'string' || name === '') {
    throw new InvalidOptionsError(`Expected \`name\` to be the dispatch queue's name, got ${String(name)}`);
  }
  return { ...options, name };
}

function module(
  name: string,
  configKey: string | undefined,
  imports: NonNullable<ModuleMetadata['imports']>,
  options: Provider,
): DynamicModule {
  const queue = BullModule.registerQueue({ name, ...(configKey === undefined ? {} : { configKey }) });
  return {
    module: StageDeferralModule,
    imports: [...imports, queue],
    providers: [
      options,
      {
        provide: bindingToken(name),
        useFactory: async (q: Queue, engineOptions: StageDeferralEngineOptions) => {
          try {
            return new Binding(q, await clientOf(q), engineOptions);
          } catch (error) {
            // refused options fail the start: the queue registered here is closed (Nest closes nothing then)
            await q.close();
            throw error;
          }
        },
        inject: [getQueueToken(name), optionsToken(name)],
      },
      {
        provide: getStageDeferralToken(name),
        useFactory: (binding: Binding) => binding.engine,
        inject: [bindingToken(name)],
      },
    ],
    exports: [getStageDeferralToken(name), queue],
  };
}

/** The queue's Redis client, connected: BullMQ 6's backend's, BullMQ 5's own. */
function clientOf(queue: Queue): Promise<RedisClient> {
  type Holder = { client: Promise<RedisClient> };
  const q = queue as unknown as Holder & { backend?: Holder };
  return (q.backend ?? q).client;
}

/**
 * The host of the job being processed: `@nestjs/bullmq` makes a host per job when its
 * dependencies are request-scoped, and the executor calls that one's `execute`.
 */
const current = new AsyncLocalStorage<StageDispatchHost<unknown, string>>();

/** The engine of one queue, and the host whose `execute` its executor calls. */
class Binding implements OnModuleDestroy {
  readonly engine: DispatchEngine;
  private host: StageDispatchHost<unknown, string> | undefined;
  private worker: Worker | undefined;
  private closing: Promise<unknown> | undefined;

  constructor(
    readonly queue: Queue,
    client: RedisClient,
    options: StageDeferralEngineOptions,
  ) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidOptionsError(`Expected the options of queue ${queue.name}'s engine to be an object`);
    }
    // the queue's own client (the engine never closes a client it was given) and its prefix
    this.engine = createDispatchEngine<unknown, string>({
      ...options,
      connection: client,
      prefix: queue.opts.prefix ?? 'bull',
      queueName: queue.name,
      executor: (ref, payload, ctx) => {
        const host = current.getStore() ?? this.host;
        if (!host) {
          throw new InvalidOptionsError(
            `No StageDispatchHost runs queue ${queue.name} in this app: a @Processor('${queue.name}') class ` +
              'extending StageDispatchHost dispatches its stages',
          );
        }
        return host.execute(ref, payload, ctx);
      },
    });
  }

  /** The host class of the queue (one), and its Worker, which the engine watches (once). */
  serve(host: StageDispatchHost<unknown, string>, worker: Worker): void {
    if (this.host && this.host.constructor !== host.constructor) {
      throw new InvalidOptionsError(
        `Expected one StageDispatchHost on queue ${worker.name}, got ${this.host.constructor.name} and ${host.constructor.name}`,
      );
    }
    this.host ??= host;
    if (this.worker) return;
    try {
      this.engine.attachWorker(worker);
    } catch (error) {
      if (!(error instanceof InvalidOptionsError)) throw error;
      throw new InvalidOptionsError(
        `${error.message}. Is queue ${worker.name} also registered with BullModule.registerQueue? ` +
          'Register a dispatch queue with StageDeferralModule.registerQueue only',
      );
    }
    this.worker = worker;
  }

  /**
   * The Worker stops taking jobs and the engine aborts the running executors
   * at once: their jobs go back (delayed, no attempt spent) while the Worker
   * still holds them; the Worker then ends, and the engine. Before
   * `@nestjs/bullmq` closes the queue and its connection (`onApplicationShutdown`).
   */
  onModuleDestroy(): Promise<unknown> {
    this.closing ??= Promise.all([this.worker?.close(), this.engine.close()]);
    return this.closing;
  }
}

/**
 * The base of your `@Processor(name)` class on a queue registered with
 * `StageDeferralModule.registerQueue({ name })`: `process` runs the engine's
 * processor, which calls your `execute` (a method: its dependencies are the
 * class's, injected as usual). `@OnWorkerEvent` methods see its Worker's events.
 * If you implement `onApplicationBootstrap` or `onModuleDestroy`, call `super`'s.
 */
export abstract class StageDispatchHost<P = unknown, R extends string = never>
  extends WorkerHost
  implements OnApplicationBootstrap, OnModuleDestroy
{
  declare private readonly moduleRef: ModuleRef;
  private binding: Binding | undefined;

  /**
   * Tries to send the stage downstream: the executor (see `Executor`). Its
   * `reason` is a built-in one or one of `R`: name the reasons of your
   * `outcomes` (`StageDispatchHost<Payload, 'gpu_busy'>`), or `string`.
   */
  abstract execute(ref: StageRef, payload: P, ctx: DispatchContext): Promise<ExecutorResult<R>>;

  /** The engine of this host's queue. */
  get engine(): DispatchEngine<P> {
    return this.bind().engine as DispatchEngine<P>;
  }

  /**
   * One dispatch job in: the engine's processor, whose executor calls this host's `execute`
   * (a host made for this job when its dependencies are request-scoped).
   */
  process(job: Job, token?: string): Promise<DispatchResult> {
    // BullMQ hands the job the Worker that runs it as its queue
    const worker = (job as unknown as { queue: Worker }).queue;
    const binding = this.bind(worker);
    return current.run(this as unknown as StageDispatchHost<unknown, string>, () =>
      binding.engine.processor(job, token),
    ) as Promise<DispatchResult>;
  }

  /**
   * A host whose queue has no engine fails the start, not its first job. (With
   * `manualRegistration` its Worker comes later: it binds at its first job.)
   */
  onApplicationBootstrap(): void {
    let worker: Worker;
    try {
      worker = this.worker;
    } catch {
      return;
    }
    this.bind(worker);
  }

  /** The Worker, then the engine (see `StageDeferralModule`). */
  async onModuleDestroy(): Promise<void> {
    await this.binding?.onModuleDestroy();
  }

  private bind(worker: Worker = this.worker): Binding {
    if (this.binding) return this.binding;
    const name = worker.name;
    let binding: Binding;
    try {
      binding = this.moduleRef.get<Binding>(bindingToken(name), { strict: false });
    } catch {
      throw new InvalidOptionsError(
        `${this.constructor.name} runs queue ${name}, which has no engine: register it with ` +
          `StageDeferralModule.registerQueue({ name: '${name}' }) instead of BullModule.registerQueue`,
      );
    }
    // a second registration of the queue (BullModule.registerQueue elsewhere) makes a second Queue
    if (this.moduleRef.get<Queue>(getQueueToken(name), { strict: false }) !== binding.queue) {
      throw new InvalidOptionsError(
        `Queue ${name} is registered twice, with StageDeferralModule.registerQueue and BullModule.registerQueue: ` +
          'register a dispatch queue with StageDeferralModule.registerQueue only',
      );
    }
    binding.serve(this as unknown as StageDispatchHost<unknown, string>, worker);
    return (this.binding = binding);
  }
}
// property injection, inherited by the subclass (its constructor is the user's own)
Inject(ModuleRef)(StageDispatchHost.prototype, 'moduleRef');
