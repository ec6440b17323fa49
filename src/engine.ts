import { Queue, Worker, type ConnectionOptions, type Processor, type WorkerOptions } from 'bullmq';
import { DeferralStore } from './deferral-store';
import { Dispatcher } from './dispatch';
import { checkCall, checkPayload } from './payload';
import {
  EngineClosedError,
  InvalidOptionsError,
  InvalidResourceError,
  isStageDeferralError,
  NoExecutorError,
} from './errors';
import { EngineEmitter, type EngineEventName, type EngineListener } from './events';
import { keptWhenFinished } from './job-data';
import { createProcessor } from './bullmq/processor';
import { checkConnection, checkQueue } from './bullmq/adapter';
import { enqueueStage } from './bullmq/producer';
import { resolveOptions, type DispatchEngineOptions, type ResolvedOptions } from './options';
import { encodeStageKind, parseStageId, scopePrefix, stageId } from './stage-ref';
import { isCursorOf, listStages, MAX_PAGE } from './store/listing';
import { closeOrDrop, quitOrDrop } from './store/client';
import { settlesWithin } from './store/within';
import { ioReader } from './store/reader';
import { readGates, type Scannable } from './store/gates';
import { checkResource, encodeResource, encodeResources, MAX_WAKE } from './resource';
import type { DeferredPage, DeferredStage, DispatchResult, EnqueueResult, GateState, StageRef } from './types';

export interface CancelResult {
  /** The stage had an open deferral, now ended. */
  hadDeferral: boolean;
  /** A dispatch was in flight; its late result will not re-create a deferral. */
  inFlight: boolean;
  /** Wake-up or waiting dispatch jobs removed. */
  removedJobs: number;
  reason: string;
}

export interface DispatchEngine<P = unknown> {
  /** Dispatches a stage now, unless it is deferred or already in flight. Producer-only engine: `NoExecutorError`. */
  dispatchStage(ref: StageRef, payload: P, opts?: { buildId?: string; force?: boolean }): Promise<DispatchResult>;
  isStageDeferred(ref: StageRef): Promise<boolean>;
  /** The Redis key whose existence is the stage's deferral (TTL = the remaining window). */
  deferredStageKey(ref: StageRef): string;
  /**
   * Cancels the stage's work: ends its deferral, removes its wake-up and a
   * waiting job, and aborts a dispatch in flight (`ctx.signal`).
   */
  cancelStage(ref: StageRef, reason?: string): Promise<CancelResult>;
  /** @deprecated The same as `cancelStage` (it cancels deferrals too); kept for 0.x. */
  cancelActiveDispatch(ref: StageRef, reason?: string): Promise<CancelResult>;
  /**
   * Wakes every deferred stage of a scope now: each deferral ends and the
   * stage is dispatched once, with a fresh chain. Returns how many it woke.
   */
  wakeScope(scopePrefix: readonly string[]): Promise<number>;
  /** @deprecated The same as `wakeScope` (a clear wakes the stages); kept for 0.x. */
  clearDeferrals(scopePrefix: readonly string[]): Promise<number>;
  /**
   * The deferred stages (all, or under a scope prefix). With `{ limit, cursor }`,
   * one page: at most `limit` (1..10,000) stages after `cursor` (the previous
   * page's `nextCursor`), in stage-id order; a page's work is bounded, so it may
   * hold fewer (even none) while `nextCursor` is not null; null ends the listing.
   */
  listDeferred(scopePrefix?: readonly string[]): Promise<DeferredStage[]>;
  listDeferred(
    scopePrefix: readonly string[] | undefined,
    page: { limit: number; cursor?: string | null },
  ): Promise<DeferredPage>;
  /**
   * Each resource's gate (open, closed until, probing) and how many stages wait in its line:
   * of the named resources (one with neither a gate nor a line is left out), else of every
   * resource that has either (found with `SCAN`). A bad name: `InvalidResourceError`, before any read.
   */
  listGates(resources?: readonly string[]): Promise<GateState[]>;
  /**
   * Capacity has returned downstream (a render slot freed, a GPU node joined):
   * ends the deferral of up to `limit` (default 1, 1..10,000) capacity-deferred
   * stages now, longest-waiting first (by when their chain of capacity
   * deferrals began; ties by stage id), filtered by a `scope` prefix and/or an
   * exact `stage` kind. Their wake-ups run now, once; their chains go on.
   * Idempotent deferrals are never woken. A dispatch of a matching stage in
   * flight meanwhile defers for `inFlightRetryMs` at most instead of a full
   * window, so the signal is not lost.
   * With `resource` (no `scope` nor `stage`): that resource's gate opens and the oldest `limit`
   * stages of its line wake (a host that knows a slot freed says so: no probe needed).
   */
  wakeDeferred(filter?: {
    limit?: number;
    scope?: readonly string[];
    stage?: string;
    resource?: string;
  }): Promise<{ woken: StageRef[] }>;
  /**
   * Adds a dispatch job for the stage unless it has one waiting, running or
   * deferred. With `replace: true` the newest payload wins for a stage that is
   * deferred or pending (its job not begun), as BullMQ's deduplication `replace`
   * does; `payloadTaken` says whether this payload will reach the executor.
   */
  enqueue(ref: StageRef, payload: P, opts?: { buildId?: string; replace?: boolean }): Promise<EnqueueResult>;
  /** A BullMQ processor for your own Worker on `queueName` (with the same prefix). Producer-only engine: reading it throws `NoExecutorError`. */
  readonly processor: Processor;
  /** A Worker on the dispatch queue, closed by `close()`. Producer-only engine: `NoExecutorError`. */
  createWorker(opts?: Omit<WorkerOptions, 'connection' | 'prefix'>): Worker;
  /**
   * For your own Worker running `processor`: records the jobs BullMQ fails by
   * itself (stalled past `maxStalledCount`, `maxStartedAttempts`, an error
   * around the attempt), as `createWorker`'s Workers do, so a cancel reaches
   * them and a retry by hand starts afresh. Returns the worker; `close()` does
   * not close it. `InvalidOptionsError` for a Worker of another queue or prefix. A producer-only
   * engine may attach one too: a sandboxed Worker's jobs run on the engine of its processor file.
   */
  attachWorker(worker: Worker): Worker;
  /** The engine's BullMQ Queue. */
  readonly queue: Queue;
  /** Subscribes to a typed engine event (`deferred`, `dispatched`, `suppressed`, ...). */
  on<E extends EngineEventName>(name: E, listener: EngineListener<E>): DispatchEngine<P>;
  once<E extends EngineEventName>(name: E, listener: EngineListener<E>): DispatchEngine<P>;
  off<E extends EngineEventName>(name: E, listener: EngineListener<E>): DispatchEngine<P>;
  /**
   * Resolves once the engine's connection is up and its Redis user may run
   * every command the engine needs; rejects with `MissingPermissionError`
   * naming those it may not (every other method would reject with it too).
   */
  waitUntilReady(): Promise<void>;
  /** Closes the workers, the queue and the connections the engine opened; never one you passed in. */
  close(): Promise<void>;
}

/**
 * Creates the engine. Opens a Queue (no Worker until `createWorker`). Throws `InvalidOptionsError`.
 * Without `options.executor` the engine is producer-only: see `NoExecutorError`.
 * `R`, the reasons of your own, is read from `outcomes`; an executor's `reason` must be one of
 * them or a built-in one. Naming the payload type names them too: `createDispatchEngine<Payload, 'gpu_busy'>`.
 */
export function createDispatchEngine<P = unknown, const R extends string = never>(
  options: DispatchEngineOptions<P, R>,
): DispatchEngine<P> {
  const { executor, ...rest } = resolveOptions(options);
  // The dispatcher runs the executor. A producer-only engine never starts an attempt:
  // dispatchStage, processor and createWorker refuse before one; enqueue, cancel and
  // close use the dispatcher only for job options, aborts and shutdown. Its stand-in
  // executor refuses too, should that ever change.
  const opts: ResolvedOptions<P> = { ...rest, executor: executor ?? refuseWithoutExecutor };
  checkConnection(opts.connection);
  const queue = new Queue(opts.queueName, { connection: opts.connection, prefix: opts.prefix });
  // (connection options: BullMQ made the Queue's client, the engine's to drop; a client passed in is the user's)
  const ownsQueueConnection = typeof (opts.connection as { duplicate?: unknown }).duplicate !== 'function';
  try {
    checkQueue(queue);
  } catch (error) {
    void queue.close().catch(() => undefined);
    throw error;
  }
  const events = new EngineEmitter();
  const store = new DeferralStore(
    queue,
    opts.waitForReplicas && { ...opts.waitForReplicas, onLag: (e) => events.emit('replicaLag', e) },
  );
  const dispatcher = new Dispatcher<P>(opts, store, queue, events);
  const processor = executor ? createProcessor(dispatcher, store, opts) : undefined;
  const workers: Worker[] = [];
  const ownedConnections: OwnedClient[] = [];
  let closed = false;
  let closing: Promise<void> | undefined;

  const open = () => {
    if (closed) throw new EngineClosedError();
  };
  const withExecutor = (method: NoExecutorError['method']) => {
    if (!executor) throw new NoExecutorError(method);
  };

  /** This host runs a Worker: a clock that leads Redis' past `maxClockSkewMs` is reported (`clockSkew`). */
  const workerHost = () =>
    store.watchClockLead(opts.maxClockSkewMs, (leadMs) =>
      events.emit('clockSkew', { leadMs, maxClockSkewMs: opts.maxClockSkewMs }),
    );

  const wake = async (filter: Parameters<DispatchEngine['wakeDeferred']>[0] & object) => {
    open();
    // (an array is an object with no filter keys: it would wake a stage of any kind and scope)
    if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
      throw new InvalidOptionsError('Expected `wakeDeferred` to get `{ limit?, scope?, stage? }`');
    }
    // a misspelt key (`kind`, `stages`) would widen the wake to every stage: refused
    const unknown = Object.keys(filter).filter((k) => !['limit', 'scope', 'stage', 'resource'].includes(k));
    if (unknown.length > 0) {
      throw new InvalidOptionsError(
        `Unknown \`wakeDeferred\` filter key ${unknown.map((k) => JSON.stringify(k)).join(', ')}: expected { limit?, scope?, stage?, resource? }`,
      );
    }
    const { limit = 1, scope, stage, resource } = filter;
    if (resource !== undefined && (scope !== undefined || stage !== undefined)) {
      throw new InvalidOptionsError(
        'Expected `wakeDeferred` to get `resource` alone (with `limit`): a line is not filtered',
      );
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_WAKE) {
      throw new InvalidOptionsError(`Expected \`limit\` to be an integer 1..${MAX_WAKE}, got ${String(limit)}`);
    }
    const prefix = scope === undefined ? '' : scopePrefix(scope);
    // a resource's line is the wait index '@<resource>' (see docs/design.md, "Resource gates")
    const kind =
      resource !== undefined
        ? `@${encodeResource(checkResource(resource, 'wakeDeferred'))}`
        : stage === undefined
          ? ''
          : encodeStageKind(stage);
    const { woken, opened } = await store.wake(limit, prefix, kind, opts.lineOrder === 'roundRobin');
    const refs = woken.map((w) => parseStageId(w.sid));
    if (opened) events.emit('gateOpened', { resource: resource!, woken: refs.length });
    woken.forEach((w, i) => events.emit('woken', { ref: refs[i]!, jobId: w.wakeUpJobId, early: true }));
    return { woken: refs };
  };

  const engine: DispatchEngine<P> = {
    queue,
    get processor() {
      if (!processor) throw new NoExecutorError('processor');
      // read for a Worker: this host promotes wake-ups by its clock
      workerHost();
      return processor;
    },

    on(name, listener) {
      events.on(name, listener);
      return engine;
    },
    once(name, listener) {
      events.once(name, listener);
      return engine;
    },
    off(name, listener) {
      events.off(name, listener);
      return engine;
    },

    async dispatchStage(ref, payload, call = {}) {
      open();
      withExecutor('dispatchStage');
      const sid = stageId(ref);
      checkPayload(payload);
      checkCall(call);
      const attempt = await dispatcher.attempt(ref, sid, payload, call);
      if (attempt.error !== undefined) throw attempt.error;
      return attempt.result;
    },

    async waitUntilReady() {
      open();
      await store.client();
    },

    async isStageDeferred(ref) {
      open();
      return store.isDeferred(stageId(ref));
    },

    deferredStageKey(ref) {
      return store.markerKey(stageId(ref));
    },

    cancelStage(ref, reason) {
      return engine.cancelActiveDispatch(ref, reason);
    },

    wakeScope(scope) {
      return engine.clearDeferrals(scope);
    },

    async cancelActiveDispatch(ref, reason = 'cancelled') {
      open();
      const sid = stageId(ref);
      const r = await store.cancel(sid);
      // a dispatch of this engine in flight learns it at once; others at their next lock renewal
      if (r.inFlight) dispatcher.abortStage(sid);
      events.emit('cancelled', { ref, reason, ...r });
      return { ...r, reason };
    },

    async clearDeferrals(scope) {
      open();
      const count = await store.clear(scopePrefix(scope));
      events.emit('cleared', { scope, count });
      return count;
    },

    // one implementation of both call shapes (the array of all, or a page)
    listDeferred: (async (scope?: readonly string[], page?: { limit: number; cursor?: string | null }) => {
      open();
      const prefix = scope === undefined || scope.length === 0 ? '' : scopePrefix(scope);
      const reader = ioReader((await store.client()) as never);
      if (page === undefined) return (await listStages(reader, store.keys, prefix)).stages;
      const { limit, cursor } = checkPage(page, prefix);
      return listStages(reader, store.keys, prefix, { limit, ...(cursor === undefined ? {} : { cursor }) });
    }) as DispatchEngine<P>['listDeferred'],

    async listGates(resources = []) {
      open();
      if (!Array.isArray(resources))
        throw new InvalidResourceError('Expected `listGates` to get an array of resource names');
      const named = encodeResources(resources, 'listGates');
      const c = await store.client();
      return readGates(c as unknown as Scannable, ioReader(c as never), store.keys, named);
    },

    wakeDeferred(filter = {}) {
      return wake(filter);
    },

    async enqueue(ref, payload, call = {}) {
      open();
      const r = await enqueueStage(store, dispatcher, ref, payload, call);
      if (r.reason === 'deferred')
        events.emit('suppressed', { ref, reason: 'deferred', until: r.until ?? 0, via: 'enqueue' });
      return r;
    },

    createWorker(workerOpts = {}) {
      open();
      withExecutor('createWorker');
      const { connection, owned } = workerConnection(opts.connection);
      if (owned) ownedConnections.push(owned);
      // (run here, not by BullMQ's autorun: a run that fails is reported only to an 'error' listener)
      const worker = new Worker(opts.queueName, engine.processor, {
        ...workerOpts,
        connection,
        prefix: opts.prefix,
        autorun: false,
      });
      workers.push(worker);
      recordFailures(worker);
      if (workerOpts.autorun !== false) {
        void worker.run().catch((error: unknown) => {
          if (worker.listenerCount('error') > 0) worker.emit('error', error as Error);
        });
      }
      return worker;
    },

    attachWorker(worker) {
      open();
      // (no executor needed: a sandboxed Worker runs the processor of the engine in its child)
      const prefix = (worker as { opts?: { prefix?: string } }).opts?.prefix ?? 'bull';
      if (worker.name !== opts.queueName || prefix !== opts.prefix) {
        throw new InvalidOptionsError(
          `attachWorker: the Worker runs queue ${JSON.stringify(worker.name)} with prefix ${JSON.stringify(prefix)}, ` +
            `the engine's queue is ${JSON.stringify(opts.queueName)} with prefix ${JSON.stringify(opts.prefix)}`,
        );
      }
      recordFailures(worker);
      workerHost();
      return worker;
    },

    close() {
      // a second call (a shutdown hook and a signal handler) waits for the same close
      closing ??= closeAll();
      return closing;
    },
  };

  /**
   * A job BullMQ fails for good by itself (an error thrown around the attempt, stalled too
   * often, maxStartedAttempts) is recorded like one the engine failed: a cancel reaches it,
   * enqueue is not blocked by it, and a retry by hand of it starts afresh.
   */
  const recordFailures = (worker: Worker) =>
    worker.on('failed', (job) => {
      if (!job?.id || !job.finishedOn) return;
      const data = job.data as { scope?: string[]; stage?: string } | undefined;
      try {
        const sid = stageId({ scope: data?.scope ?? [], stage: data?.stage ?? '' });
        void store.markFailed(sid, job.id, keptWhenFinished(job.opts.removeOnFail)).catch(() => undefined);
      } catch {
        // not a dispatch job's data: nothing of the engine's to record
      }
    });

  // the calls under way besides attempts (enqueue, cancel, clear, wake, the views): close() waits
  // for them before it closes their connections, so each ends with its answer, not ioredis' error
  const calls = new Set<Promise<unknown>>();
  // settles every call still under way once close() has closed the connections (one waiting for a
  // connection that never came up would wait forever)
  let cutOff!: () => void;
  const cut = new Promise<never>((_, reject) => (cutOff = () => reject(new EngineClosedError())));
  cut.catch(() => undefined);
  for (const name of TRACKED) {
    const call = engine[name] as (...args: unknown[]) => Promise<unknown>;
    (engine as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      // a call under way when close() began fails as the engine closed, whatever ended it (the cut, or
      // a connection closed under it: the user's own, quit meanwhile; a Redis gone, with a retry limit)
      const p = Promise.race([call.apply(engine, args), cut]).catch((error: unknown) => {
        throw closed && !isStageDeferralError(error) ? new EngineClosedError(error) : error;
      });
      calls.add(p);
      // Stryker disable next-line ArrowFunction: equivalent but for memory: a settled call left in the set is awaited at once by close()
      const settled = () => calls.delete(p);
      void p.then(settled, settled);
      return p;
    };
  }

  const closeAll = async () => {
    closed = true;
    // no new attempt starts; running ones are aborted, keep their locks renewed, and end
    // (a job interrupted this way is delayed, no attempt spent); then the workers close
    // (calls waited for a while only: one waiting on a Redis that does not answer ends once its
    // connection closes below, or at the end of the close, with EngineClosedError)
    const waited = settlesWithin(Promise.allSettled([...calls]), CLOSE_CALLS_MS);
    await Promise.all([dispatcher.close(), ...workers.map((w) => w.close()), waited]);
    // the calls still waiting end now (their connections close below)
    cutOff();
    await store.close();
    // BullMQ's Queue.close() waits for its QUIT; a Redis that stopped answering never answers it:
    // its connection is dropped then, unless it is the user's own (BullMQ does not close those)
    await closeOrDrop(
      () => queue.close(),
      () => (ownsQueueConnection ? queue.disconnect() : undefined),
    );
    await Promise.all(ownedConnections.map(quitOrDrop));
    events.removeAllListeners();
  };
  return engine;
}

/** How long close() waits for the calls under way before it closes their connections, ms. */
const CLOSE_CALLS_MS = 2000;

/** The engine's calls close() waits for (an attempt's `dispatchStage` is the dispatcher's). */
const TRACKED = [
  'waitUntilReady',
  'enqueue',
  'cancelActiveDispatch',
  'clearDeferrals',
  'wakeDeferred',
  'isStageDeferred',
  'listDeferred',
  'listGates',
] as const satisfies readonly (keyof DispatchEngine)[];

/** The executor of a producer-only engine's dispatcher: never run (see createDispatchEngine). */
async function refuseWithoutExecutor(): Promise<never> {
  throw new NoExecutorError('dispatchStage');
}

/**
 * A Worker needs `maxRetriesPerRequest: null`. Options get it set; a client
 * the user passed in is duplicated with it (the duplicate is ours to close).
 */
type OwnedClient = { quit(): Promise<unknown>; disconnect(): void };

/** @internal exported for its tests */
export function workerConnection(connection: ConnectionOptions): {
  connection: ConnectionOptions;
  owned?: OwnedClient;
} {
  const client = connection as {
    duplicate?: (...args: unknown[]) => OwnedClient;
    isCluster?: boolean;
    options?: Record<string, unknown>;
  };
  if (typeof client.duplicate !== 'function') {
    return { connection: { ...(connection as object), maxRetriesPerRequest: null } as ConnectionOptions };
  }
  const owned = client.isCluster
    ? client.duplicate(undefined, {
        // ioredis 5's duplicate() replaces redisOptions whole (6 merges them), so they are carried over here.
        // Stryker disable next-line LogicalOperator: equivalent on ioredis 6, the gate's; on ioredis 5 the compat run of engine.survivors kills it
        redisOptions: { ...((client.options?.redisOptions as object) ?? {}), maxRetriesPerRequest: null },
      })
    : client.duplicate({ maxRetriesPerRequest: null });
  return { connection: owned as unknown as ConnectionOptions, owned };
}

/** A `listDeferred` page request, checked: `limit` an integer 1..10,000, `cursor` one this listing printed. */
function checkPage(page: unknown, prefix: string): { limit: number; cursor?: string } {
  if (typeof page !== 'object' || page === null)
    throw new InvalidOptionsError('Expected `listDeferred` to get `{ limit, cursor? }` as its page');
  const { limit, cursor } = page as { limit?: unknown; cursor?: unknown };
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
    throw new InvalidOptionsError(`Expected \`limit\` to be an integer from 1 to ${MAX_PAGE}, got ${String(limit)}`);
  if (cursor === undefined || cursor === null) return { limit };
  if (!isCursorOf(prefix, cursor))
    throw new InvalidOptionsError(
      `Expected \`cursor\` to be a \`nextCursor\` of this listing, got ${JSON.stringify(cursor)}`,
    );
  return { limit, cursor };
}
